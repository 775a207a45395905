import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Status values are at most this long (plans.status is varchar(16)). */
const STATUS_WIDTH = 16;

/**
 * SQLite: a plan's row keeps its size when its status changes. SQLite rewrites a whole row,
 * its overflow pages included, when an UPDATE changes the row's size, and overwrites in place
 * only the pages that changed when it does not: the publish that marked the previous plan
 * SUPERSEDED (9 characters to 10) wrote that plan's content to the WAL again, a megabyte for a
 * 1 MiB plan, and the checkpoint copied it back. `status_width` is stored beside `status` and
 * pads it to 16 characters, so every status and its padding take the same bytes in the row, and
 * the columns after them (the content) keep their place. Nothing reads it; no statement names
 * it (SQLite computes it).
 *
 * SQLite adds a stored generated column only to a new table, so the table is rebuilt once: its
 * rows copied (the time and the free disk space of the plans' content), then its indexes made
 * again. PostgreSQL keeps large values out of the row (TOAST) and an UPDATE that does not
 * change them does not copy them: nothing to do there.
 */
export class PlanRowWidth1766600000000 implements MigrationInterface {
  name = 'PlanRowWidth1766600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    const [table] = (await queryRunner.query(
      "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'plans'",
    )) as { sql: string }[];
    const indexes = (await queryRunner.query(
      "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'plans' AND sql IS NOT NULL",
    )) as { sql: string }[];
    const columns = ((await queryRunner.query('PRAGMA table_info("plans")')) as { name: string }[])
      .map(({ name }) => `"${name}"`)
      .join(', ');
    const definition = table.sql.trim();
    const status = '"status" varchar(16) NOT NULL, ';
    if (!definition.startsWith('CREATE TABLE "plans" (') || !definition.includes(status))
      throw new Error(`unexpected definition of plans: ${definition.slice(0, 120)}`);
    // Right after the status, so that the two together keep their length and every column
    // after them keeps its place in the record (else the content would move by a byte).
    const width =
      `"status_width" text GENERATED ALWAYS AS ` +
      `(substr('${' '.repeat(STATUS_WIDTH)}', 1, ${STATUS_WIDTH} - length("status"))) STORED, `;
    await queryRunner.query(
      definition
        .replace('CREATE TABLE "plans" (', 'CREATE TABLE "plans_rebuilt" (')
        .replace(status, status + width),
    );
    await queryRunner.query(
      `INSERT INTO "plans_rebuilt" (${columns}) SELECT ${columns} FROM "plans" ORDER BY rowid`,
    );
    await queryRunner.query('DROP TABLE "plans"');
    await queryRunner.query('ALTER TABLE "plans_rebuilt" RENAME TO "plans"');
    for (const { sql } of indexes) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('ALTER TABLE "plans" DROP COLUMN "status_width"');
  }
}
