import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

/**
 * The lease queue (DESIGN §17): each environment's queue mode and length limit, and one row
 * per ticket, never deleted. A ticket's id orders its environment's queue: tickets are
 * inserted while their writer holds the environment's row, so ids grow in commit order.
 */
export class LeaseQueue1765400000000 implements MigrationInterface {
  name = 'LeaseQueue1765400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns('environments', [
      new TableColumn({
        name: 'queue_mode',
        type: 'varchar',
        length: '8',
        default: "'FIFO'",
      }),
      new TableColumn({ name: 'max_queue_length', type: 'integer', default: 20 }),
    ]);
    const bigint = (name: string, isNullable = false) => ({ name, type: 'bigint', isNullable });
    await queryRunner.createTable(
      new Table({
        name: 'lease_tickets',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'environment', type: 'varchar', length: '63' },
          { name: 'principal', type: 'varchar', length: '63' },
          { name: 'holder', type: 'varchar', length: '320' },
          { name: 'ttl_seconds', type: 'integer' },
          // WAITING, GRANTED, SUPERSEDED, EXPIRED, CANCELLED
          { name: 'status', type: 'varchar', length: '16' },
          bigint('enqueued_at'),
          // When a WAITING ticket turns EXPIRED (enqueue + maxWaitSeconds).
          bigint('expires_at'),
          bigint('granted_at', true),
          // The generation its grant issued (GRANTED only).
          { name: 'generation', type: 'integer', isNullable: true },
          // When it left WAITING (any status).
          bigint('ended_at', true),
        ],
        indices: [
          { name: 'lease_tickets_queue', columnNames: ['environment', 'status', 'id'] },
          { name: 'lease_tickets_waiting', columnNames: ['status', 'expires_at'] },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('lease_tickets');
    await queryRunner.dropColumn('environments', 'max_queue_length');
    await queryRunner.dropColumn('environments', 'queue_mode');
  }
}
