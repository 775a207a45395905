import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/**
 * The door each approval came through (graphql, mcp, slack), recorded with it (DESIGN R43,
 * Approval.via). Approvals recorded before have none.
 */
export class ApprovalVia1766500000000 implements MigrationInterface {
  name = 'ApprovalVia1766500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'approvals',
      new TableColumn({ name: 'via', type: 'varchar', length: '16', isNullable: true }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('approvals', 'via');
  }
}
