import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';

/**
 * Events that leave the process (DESIGN §11): the outbox, written by the deciding
 * transaction; webhooks with the event types and environment patterns they want; one
 * delivery row per (webhook, event), queued by the dispatcher from the outbox.
 */
export class OutboxWebhooks1764900000000 implements MigrationInterface {
  name = 'OutboxWebhooks1764900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = (name: string, length: number, isNullable = false) => ({
      name,
      type: 'varchar',
      length: String(length),
      isNullable,
    });
    const bigint = (name: string, isNullable = false) => ({ name, type: 'bigint', isNullable });
    const serial = {
      name: 'id',
      type: 'integer',
      isPrimary: true,
      isGenerated: true,
      generationStrategy: 'increment' as const,
    };
    await queryRunner.createTable(
      new Table({
        name: 'outbox_events',
        columns: [
          serial,
          text('environment', 63),
          text('type', 32),
          bigint('at'),
          bigint('generation', true),
          bigint('sequence', true),
          text('plan_id', 100, true),
          bigint('deployment_sequence', true),
          text('actor', 255, true),
          { name: 'data', type: 'text' },
          // 1 once the dispatcher has queued the event's deliveries (one per interested webhook).
          { name: 'fanned_out', type: 'integer', default: 0 },
        ],
        indices: [
          { name: 'outbox_events_environment', columnNames: ['environment', 'id'] },
          { name: 'outbox_events_at', columnNames: ['at'] },
          { name: 'outbox_events_waiting', columnNames: ['id'], where: 'fanned_out = 0' },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'webhooks',
        columns: [
          { ...text('id', 36), isPrimary: true },
          text('url', 2048),
          text('format', 8),
          text('secret', 128),
          // JSON arrays as the ADMIN gave them (for reading back); matching uses the tables below.
          { name: 'events', type: 'text' },
          { name: 'environments', type: 'text', isNullable: true },
          { name: 'all_environments', type: 'integer' },
          text('created_by', 255),
          bigint('created_at'),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'webhook_event_types',
        columns: [
          { ...text('webhook_id', 36), isPrimary: true },
          { ...text('event_type', 32), isPrimary: true },
        ],
        indices: [{ name: 'webhook_event_types_type', columnNames: ['event_type'] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'webhook_environments',
        columns: [
          { ...text('webhook_id', 36), isPrimary: true },
          // An environment pattern as a LIKE pattern (`*` → `%`, `_` escaped with `\`).
          { ...text('pattern', 130), isPrimary: true },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'webhook_deliveries',
        columns: [
          serial,
          text('webhook_id', 36),
          { name: 'event_id', type: 'integer' },
          text('environment', 63),
          text('event_type', 32),
          text('status', 12),
          { name: 'attempts', type: 'integer', default: 0 },
          bigint('created_at'),
          // Attempts and maximum age count from here: the creation, or the last redelivery.
          bigint('retry_from'),
          bigint('next_attempt_at', true),
          bigint('last_attempt_at', true),
          { name: 'last_error', type: 'text', isNullable: true },
          bigint('delivered_at', true),
          // The instance making an attempt now, and until when its claim holds.
          text('claimed_by', 64, true),
          bigint('claimed_until', true),
        ],
        indices: [
          { name: 'webhook_deliveries_due', columnNames: ['status', 'next_attempt_at'] },
          {
            name: 'webhook_deliveries_line',
            columnNames: ['webhook_id', 'environment', 'status', 'id'],
          },
          { name: 'webhook_deliveries_webhook', columnNames: ['webhook_id', 'id'] },
          { name: 'webhook_deliveries_event', columnNames: ['event_id'] },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of [
      'webhook_deliveries',
      'webhook_environments',
      'webhook_event_types',
      'webhooks',
      'outbox_events',
    ]) {
      await queryRunner.dropTable(table);
    }
  }
}
