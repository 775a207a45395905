import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/**
 * Agents over MCP (DESIGN §14, R28): each audit event says which door its request came
 * through, `graphql` or `mcp`; null for the service's own decisions (a lapsed heartbeat)
 * and for events written before this column existed.
 */
export class AuditVia1765100000000 implements MigrationInterface {
  name = 'AuditVia1765100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'audit_events',
      new TableColumn({ name: 'via', type: 'varchar', length: '16', isNullable: true }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('audit_events', 'via');
  }
}
