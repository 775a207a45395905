import { type MigrationInterface, type QueryRunner, Table, type TableColumnOptions } from 'typeorm';

/** Written once with TypeORM's dialect-neutral Table API: the same file serves SQLite and PostgreSQL. */
const name = (
  column: string,
  length = 63,
  extra: Partial<TableColumnOptions> = {},
): TableColumnOptions => ({
  name: column,
  type: 'varchar',
  length: String(length),
  ...extra,
});
const int = (column: string, extra: Partial<TableColumnOptions> = {}): TableColumnOptions => ({
  name: column,
  type: 'integer',
  ...extra,
});
const millis = (column: string, nullable = false): TableColumnOptions => ({
  name: column,
  type: 'bigint',
  isNullable: nullable,
});

export class InitialSchema1764400000000 implements MigrationInterface {
  name = 'InitialSchema1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'principals',
        columns: [
          name('name', 63, { isPrimary: true }),
          name('role', 16),
          name('token_hash', 64, { isUnique: true }),
          millis('created_at'),
          millis('revoked_at', true),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'environments',
        columns: [
          name('name', 63, { isPrimary: true }),
          name('mode', 16),
          { name: 'require_approval', type: 'boolean' },
          int('fence', { default: 0 }),
          int('last_issued_generation', { default: 0 }),
          name('lease_holder', 320, { isNullable: true }),
          name('lease_principal', 63, { isNullable: true }),
          int('lease_generation', { isNullable: true }),
          millis('lease_acquired_at', true),
          millis('lease_expires_at', true),
          name('current_plan_id', 100, { isNullable: true }),
          int('current_generation', { default: 0 }),
          int('current_sequence', { default: 0 }),
          millis('created_at'),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'lease_grants',
        columns: [
          name('environment', 63, { isPrimary: true }),
          int('generation', { isPrimary: true }),
          name('principal'),
          name('holder', 320),
          millis('acquired_at'),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'plans',
        columns: [
          name('id', 100, { isPrimary: true }),
          name('environment'),
          int('generation'),
          int('sequence'),
          name('status', 16),
          name('title', 255, { isNullable: true }),
          { name: 'content', type: 'text' },
          name('content_hash', 64),
          name('submitted_by'),
          millis('submitted_at'),
          name('based_on_plan_id', 100, { isNullable: true }),
          name('reviewed_by', 63, { isNullable: true }),
          millis('reviewed_at', true),
          name('rejection_reason', 255, { isNullable: true }),
          millis('published_at', true),
        ],
        indices: [
          {
            name: 'plans_environment_generation_sequence',
            columnNames: ['environment', 'generation', 'sequence'],
            isUnique: true,
          },
          { name: 'plans_environment_status', columnNames: ['environment', 'status'] },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'audit_events',
        columns: [
          int('id', { isPrimary: true, isGenerated: true, generationStrategy: 'increment' }),
          millis('at'),
          name('environment'),
          name('actor', 320),
          name('action', 32),
          int('generation', { isNullable: true }),
          name('plan_id', 100, { isNullable: true }),
          name('outcome', 16),
          name('code', 32, { isNullable: true }),
          { name: 'detail', type: 'text', isNullable: true },
        ],
        indices: [{ name: 'audit_events_environment_id', columnNames: ['environment', 'id'] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'idempotency_records',
        columns: [
          name('principal', 63, { isPrimary: true }),
          name('idempotency_key', 255, { isPrimary: true }),
          name('operation', 32),
          name('fingerprint', 64),
          name('plan_id', 100, { isNullable: true }),
          name('error_code', 32, { isNullable: true }),
          { name: 'error_message', type: 'text', isNullable: true },
          { name: 'error_details', type: 'text', isNullable: true },
          millis('created_at'),
          millis('expires_at'),
        ],
        indices: [{ name: 'idempotency_records_expires_at', columnNames: ['expires_at'] }],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of [
      'idempotency_records',
      'audit_events',
      'plans',
      'lease_grants',
      'environments',
      'principals',
    ]) {
      await queryRunner.dropTable(table);
    }
  }
}
