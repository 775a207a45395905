import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

/**
 * Preconditions beyond approval (DESIGN §22, R50–R53): per environment the checks whose
 * latest result must be SUCCESS before a plan is published (one row per name), the
 * environment a plan must have succeeded in first and how long it must have soaked there,
 * the window in which a published plan must start deploying, and when drift was last
 * reported; per plan the latest result of each check reported on it. Existing environments
 * require nothing of the kind.
 */
export class Preconditions1766300000000 implements MigrationInterface {
  name = 'Preconditions1766300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns('environments', [
      new TableColumn({ name: 'promotion_from', type: 'varchar', length: '63', isNullable: true }),
      new TableColumn({ name: 'promotion_soak_minutes', type: 'integer', isNullable: true }),
      new TableColumn({ name: 'deploy_within_minutes', type: 'integer', isNullable: true }),
      new TableColumn({ name: 'drift_reported_at', type: 'bigint', isNullable: true }),
    ]);
    await queryRunner.createTable(
      new Table({
        name: 'required_checks',
        columns: [
          { name: 'environment', type: 'varchar', length: '63', isPrimary: true },
          { name: 'name', type: 'varchar', length: '63', isPrimary: true },
          { name: 'position', type: 'integer' },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'check_results',
        columns: [
          { name: 'plan_id', type: 'varchar', length: '100', isPrimary: true },
          { name: 'name', type: 'varchar', length: '63', isPrimary: true },
          // PENDING, SUCCESS, FAILURE: the latest report of this check on this plan.
          { name: 'status', type: 'varchar', length: '16' },
          { name: 'summary', type: 'varchar', length: '1024', isNullable: true },
          { name: 'details_url', type: 'varchar', length: '2048', isNullable: true },
          { name: 'reported_by', type: 'varchar', length: '63' },
          { name: 'at', type: 'bigint' },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('check_results');
    await queryRunner.dropTable('required_checks');
    await queryRunner.dropColumn('environments', 'drift_reported_at');
    await queryRunner.dropColumn('environments', 'deploy_within_minutes');
    await queryRunner.dropColumn('environments', 'promotion_soak_minutes');
    await queryRunner.dropColumn('environments', 'promotion_from');
  }
}
