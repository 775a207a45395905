import {
  type MigrationInterface,
  type QueryRunner,
  Table,
  TableColumn,
  type TableColumnOptions,
} from 'typeorm';

/**
 * Approval policies (DESIGN §9): principals' groups, each environment's approval rules,
 * proposal TTL and freeze, the approvals of each plan, and when a proposal expires.
 * Written once with TypeORM's dialect-neutral Table API, like the initial schema.
 */
const text = (column: string, length: number, nullable = false): TableColumnOptions => ({
  name: column,
  type: 'varchar',
  length: String(length),
  isNullable: nullable,
});

export class ApprovalPolicies1764600000000 implements MigrationInterface {
  name = 'ApprovalPolicies1764600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'principal_groups',
        columns: [
          { ...text('principal', 63), isPrimary: true },
          { ...text('group_name', 63), isPrimary: true },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'approval_rules',
        columns: [
          { ...text('environment', 63), isPrimary: true },
          { name: 'position', type: 'integer', isPrimary: true },
          text('group_name', 63, true),
          { name: 'required_count', type: 'integer' },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'approvals',
        columns: [
          { ...text('plan_id', 100), isPrimary: true },
          { ...text('approver', 63), isPrimary: true },
          { name: 'at', type: 'bigint' },
          text('content_hash', 64),
          text('break_glass_reason', 255, true),
        ],
      }),
    );
    await queryRunner.addColumns('environments', [
      new TableColumn({ name: 'proposal_ttl_seconds', type: 'integer', isNullable: true }),
      new TableColumn(text('frozen_reason', 255, true)),
      new TableColumn(text('frozen_by', 63, true)),
      new TableColumn({ name: 'frozen_at', type: 'bigint', isNullable: true }),
    ]);
    await queryRunner.addColumn(
      'plans',
      new TableColumn({ name: 'expires_at', type: 'bigint', isNullable: true }),
    );
    // The default policy, one approval by anyone but the submitter, for every existing environment.
    await queryRunner.query(
      `INSERT INTO approval_rules (environment, position, group_name, required_count)
       SELECT name, 0, NULL, 1 FROM environments`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('plans', 'expires_at');
    for (const column of ['frozen_at', 'frozen_by', 'frozen_reason', 'proposal_ttl_seconds']) {
      await queryRunner.dropColumn('environments', column);
    }
    for (const table of ['approvals', 'approval_rules', 'principal_groups']) {
      await queryRunner.dropTable(table);
    }
  }
}
