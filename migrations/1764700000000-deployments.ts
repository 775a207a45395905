import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

/**
 * Deployments (DESIGN §10): one row per accepted start, the environment's deployment
 * sequence counter, and the deployment an idempotency record remembers. Written once with
 * TypeORM's dialect-neutral API: the same file serves SQLite and PostgreSQL.
 */
export class Deployments1764700000000 implements MigrationInterface {
  name = 'Deployments1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'environments',
      new TableColumn({ name: 'deployment_sequence', type: 'integer', default: 0 }),
    );
    await queryRunner.addColumn(
      'idempotency_records',
      new TableColumn({ name: 'deployment_id', type: 'varchar', length: '100', isNullable: true }),
    );
    const text = (name: string, length: number, isNullable = false) => ({
      name,
      type: 'varchar',
      length: String(length),
      isNullable,
    });
    await queryRunner.createTable(
      new Table({
        name: 'deployments',
        columns: [
          text('id', 100),
          text('environment', 63),
          { name: 'sequence', type: 'integer' },
          text('plan_id', 100),
          text('status', 16),
          text('started_by', 63),
          { name: 'started_at', type: 'bigint' },
          { name: 'heartbeat_expires_at', type: 'bigint' },
          { name: 'finished_at', type: 'bigint', isNullable: true },
          { name: 'detail', type: 'text', isNullable: true },
          text('reconciled_by', 63, true),
          { name: 'reconcile_note', type: 'text', isNullable: true },
        ].map((column) => (column.name === 'id' ? { ...column, isPrimary: true } : column)),
        indices: [
          {
            name: 'deployments_environment_sequence',
            columnNames: ['environment', 'sequence'],
            isUnique: true,
          },
          // At most one IN_PROGRESS or UNKNOWN deployment per environment, whatever the statements do.
          {
            name: 'deployments_one_active',
            columnNames: ['environment'],
            isUnique: true,
            where: "status IN ('IN_PROGRESS', 'UNKNOWN')",
          },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('deployments');
    await queryRunner.dropColumn('idempotency_records', 'deployment_id');
    await queryRunner.dropColumn('environments', 'deployment_sequence');
  }
}
