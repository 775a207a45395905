import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/** When retention removed a plan's content (the metadata and contentHash stay). */
export class PlanPurgedAt1764500000000 implements MigrationInterface {
  name = 'PlanPurgedAt1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'plans',
      new TableColumn({ name: 'purged_at', type: 'bigint', isNullable: true }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('plans', 'purged_at');
  }
}
