import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/**
 * Plans that are understood (DESIGN §15): the content type, the summary the service
 * computed, the binary plan file and its hash, the deployment sequence the plan was made
 * against (R33) and the source revision. Existing plans are TEXT.
 */
export class TerraformPlans1765000000000 implements MigrationInterface {
  name = 'TerraformPlans1765000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns('plans', [
      new TableColumn({
        name: 'content_type',
        type: 'varchar',
        length: '32',
        default: "'TEXT'",
      }),
      new TableColumn({ name: 'summary', type: 'text', isNullable: true }),
      new TableColumn({ name: 'artifact', type: 'text', isNullable: true }),
      new TableColumn({ name: 'artifact_hash', type: 'varchar', length: '64', isNullable: true }),
      new TableColumn({ name: 'based_on_deployment_sequence', type: 'integer', isNullable: true }),
      new TableColumn({
        name: 'source_revision',
        type: 'varchar',
        length: '255',
        isNullable: true,
      }),
    ]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const column of [
      'source_revision',
      'based_on_deployment_sequence',
      'artifact_hash',
      'artifact',
      'summary',
      'content_type',
    ]) {
      await queryRunner.dropColumn('plans', column);
    }
  }
}
