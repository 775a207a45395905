import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/**
 * The Terraform state a plan is bound to (DESIGN R56): the lineage and serial read from a
 * plan file's `tfstate` entry at submit, and per environment the state an applier last
 * reported after an apply. Existing plans and environments have none.
 */
export class TerraformState1766100000000 implements MigrationInterface {
  name = 'TerraformState1766100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns('plans', [
      new TableColumn({
        name: 'prior_state_lineage',
        type: 'varchar',
        length: '64',
        isNullable: true,
      }),
      new TableColumn({ name: 'prior_state_serial', type: 'integer', isNullable: true }),
    ]);
    await queryRunner.addColumns('environments', [
      new TableColumn({ name: 'state_lineage', type: 'varchar', length: '64', isNullable: true }),
      new TableColumn({ name: 'state_serial', type: 'integer', isNullable: true }),
    ]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('environments', 'state_serial');
    await queryRunner.dropColumn('environments', 'state_lineage');
    await queryRunner.dropColumn('plans', 'prior_state_serial');
    await queryRunner.dropColumn('plans', 'prior_state_lineage');
  }
}
