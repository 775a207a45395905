import { type MigrationInterface, type QueryRunner, Table, TableColumn, TableIndex } from 'typeorm';

/**
 * People sign in (DESIGN §19, R40–R43): a principal made by a sign-in records the person
 * (the provider's issuer and subject, which name it, and the email and name it gave); one
 * row per session, its secret stored hashed, with its idle and absolute lifetimes; a
 * command line's session first holds a one-time code (hashed) that the command exchanges
 * for the session's secret. Existing principals are no person.
 */
export class Sessions1766200000000 implements MigrationInterface {
  name = 'Sessions1766200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = (name: string, length: number, isNullable = true) =>
      new TableColumn({ name, type: 'varchar', length: String(length), isNullable });
    await queryRunner.addColumns('principals', [
      text('person_issuer', 255),
      text('person_subject', 255),
      text('person_email', 320),
      text('person_name', 255),
    ]);
    await queryRunner.createIndex(
      'principals',
      new TableIndex({
        name: 'principals_person',
        columnNames: ['person_issuer', 'person_subject'],
        isUnique: true,
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'sessions',
        columns: [
          { name: 'id', type: 'varchar', length: '40', isPrimary: true },
          { name: 'principal', type: 'varchar', length: '255' },
          { name: 'token_hash', type: 'varchar', length: '64', isUnique: true },
          // console (a cookie) or cli (a bearer token stored by `planfence login`)
          { name: 'kind', type: 'varchar', length: '16' },
          { name: 'created_at', type: 'bigint' },
          { name: 'last_seen_at', type: 'bigint' },
          { name: 'expires_at', type: 'bigint' },
          { name: 'idle_minutes', type: 'integer' },
          { name: 'ended_at', type: 'bigint', isNullable: true },
          { name: 'code_hash', type: 'varchar', length: '64', isNullable: true, isUnique: true },
          { name: 'code_challenge', type: 'varchar', length: '64', isNullable: true },
          { name: 'code_expires_at', type: 'bigint', isNullable: true },
        ],
        indices: [{ name: 'sessions_principal', columnNames: ['principal'] }],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('sessions');
    await queryRunner.dropIndex('principals', 'principals_person');
    for (const column of ['person_name', 'person_email', 'person_subject', 'person_issuer'])
      await queryRunner.dropColumn('principals', column);
  }
}
