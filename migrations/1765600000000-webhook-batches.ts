import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

/**
 * Webhooks that take several events per request: `batch_size` is the most consecutive
 * deliveries of one (webhook, environment) line a request carries; 1 (every webhook made
 * before this column existed) sends one event per request, the body R23 describes.
 */
export class WebhookBatches1765600000000 implements MigrationInterface {
  name = 'WebhookBatches1765600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(
      'webhooks',
      new TableColumn({ name: 'batch_size', type: 'integer', default: 1 }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('webhooks', 'batch_size');
  }
}
