import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

/**
 * Identity (DESIGN §12): a principal's environment patterns (a JSON array, null: all) and
 * expiry; the OIDC token ids already exchanged (kept until the JWT's `exp`); one row per
 * OIDC exchange. Principal names made from OIDC claims hold up to 255 characters, so on
 * PostgreSQL (SQLite does not enforce varchar lengths) every column that holds a principal's
 * name is widened. Written with TypeORM's dialect-neutral API: one file for both dialects.
 */
export class ScopedTokens1764800000000 implements MigrationInterface {
  name = 'ScopedTokens1764800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'principals',
      new TableColumn({ name: 'environments', type: 'text', isNullable: true }),
    );
    await queryRunner.addColumn(
      'principals',
      new TableColumn({ name: 'expires_at', type: 'bigint', isNullable: true }),
    );
    // The OIDC issuer whose exchanges own this principal; null for tokens an ADMIN issued.
    await queryRunner.addColumn(
      'principals',
      new TableColumn({ name: 'oidc_issuer', type: 'varchar', length: '255', isNullable: true }),
    );
    const text = (name: string, length: number, isNullable = false) => ({
      name,
      type: 'varchar',
      length: String(length),
      isNullable,
    });
    await queryRunner.createTable(
      new Table({
        name: 'oidc_used_tokens',
        columns: [
          { ...text('issuer', 255), isPrimary: true },
          { ...text('jti', 255), isPrimary: true },
          { name: 'expires_at', type: 'bigint' },
        ],
        indices: [{ name: 'oidc_used_tokens_expires_at', columnNames: ['expires_at'] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'oidc_exchanges',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'at', type: 'bigint' },
          text('issuer', 255),
          text('subject', 255, true),
          text('principal', 255, true),
          { name: 'rule_index', type: 'integer', isNullable: true },
          text('outcome', 16),
          text('code', 32, true),
          { name: 'detail', type: 'text', isNullable: true },
        ],
        indices: [{ name: 'oidc_exchanges_at', columnNames: ['at'] }],
      }),
    );
    if (queryRunner.connection.options.type === 'postgres') {
      for (const [table, column] of PRINCIPAL_NAME_COLUMNS) {
        await queryRunner.query(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE varchar(255)`);
      }
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('oidc_exchanges');
    await queryRunner.dropTable('oidc_used_tokens');
    await queryRunner.dropColumn('principals', 'oidc_issuer');
    await queryRunner.dropColumn('principals', 'expires_at');
    await queryRunner.dropColumn('principals', 'environments');
  }
}

/** Columns that hold a principal's name and were created 63 characters wide. */
const PRINCIPAL_NAME_COLUMNS: [string, string][] = [
  ['principals', 'name'],
  ['principal_groups', 'principal'],
  ['environments', 'lease_principal'],
  ['environments', 'frozen_by'],
  ['plans', 'submitted_by'],
  ['plans', 'reviewed_by'],
  ['approvals', 'approver'],
  ['idempotency_records', 'principal'],
  ['lease_grants', 'principal'],
  ['deployments', 'started_by'],
  ['deployments', 'reconciled_by'],
];
