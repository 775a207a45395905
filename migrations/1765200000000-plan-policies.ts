import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

/**
 * Plan policies (DESIGN §16): each environment's ordered CEL policies and its policy
 * version (bumped by every change); what each plan was decided under (the version and the
 * results, immutable) and the approvals its REQUIRE_APPROVAL results added. Written with
 * TypeORM's dialect-neutral API: one file for both dialects.
 */
export class PlanPolicies1765200000000 implements MigrationInterface {
  name = 'PlanPolicies1765200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = (name: string, length: number, isNullable = false) => ({
      name,
      type: 'varchar',
      length: String(length),
      isNullable,
    });
    await queryRunner.addColumn(
      'environments',
      new TableColumn({ name: 'policy_version', type: 'integer', default: 0 }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'plan_policies',
        columns: [
          { ...text('environment', 63), isPrimary: true },
          { name: 'position', type: 'integer', isPrimary: true },
          text('name', 63),
          { name: 'expression', type: 'text' },
          text('effect', 16),
          { name: 'message', type: 'text' },
          text('group_name', 63, true),
          { name: 'required_count', type: 'integer', isNullable: true },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'plan_approval_rules',
        columns: [
          { ...text('plan_id', 100), isPrimary: true },
          { name: 'position', type: 'integer', isPrimary: true },
          text('group_name', 63, true),
          { name: 'required_count', type: 'integer' },
        ],
      }),
    );
    await queryRunner.addColumns('plans', [
      new TableColumn({ name: 'policy_version', type: 'integer', isNullable: true }),
      new TableColumn({ name: 'policy_results', type: 'text', isNullable: true }),
    ]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('plans', 'policy_results');
    await queryRunner.dropColumn('plans', 'policy_version');
    await queryRunner.dropTable('plan_approval_rules');
    await queryRunner.dropTable('plan_policies');
    await queryRunner.dropColumn('environments', 'policy_version');
  }
}
