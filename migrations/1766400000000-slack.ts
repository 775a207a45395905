import { type MigrationInterface, type QueryRunner, Table, TableColumn } from 'typeorm';

const text = (name: string, length: string, isNullable = false) => ({
  name,
  type: 'varchar',
  length,
  isNullable,
});
const millis = (name: string, isNullable = false) => ({ name, type: 'bigint', isNullable });

/**
 * Reviews in Slack (DESIGN §20, R45–R47): the Slack users linked to principals, the
 * one-time link codes, one message per plan awaiting review, the first outcome of each
 * click (one-shot) and the signatures of requests already answered (a replayed request is
 * refused). Outbox events gain `slack_pending`: the Slack sender takes each event once, in
 * addition to the webhooks' fan-out; the events already there are not for it.
 */
export class Slack1766400000000 implements MigrationInterface {
  name = 'Slack1766400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'slack_links',
        columns: [
          { ...text('team_id', '64'), isPrimary: true },
          { ...text('user_id', '64'), isPrimary: true },
          text('principal', '255'),
          millis('linked_at'),
        ],
        indices: [{ name: 'slack_links_principal', columnNames: ['principal'] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'slack_link_codes',
        columns: [
          { ...text('code_hash', '64'), isPrimary: true },
          text('team_id', '64'),
          text('user_id', '64'),
          millis('created_at'),
          millis('expires_at'),
          millis('used_at', true),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'slack_messages',
        columns: [
          { ...text('plan_id', '255'), isPrimary: true },
          text('environment', '255'),
          text('channel', '255'),
          text('ts', '64', true),
          text('drawn_hash', '64', true),
          { name: 'closed', type: 'integer', default: 0 },
          { name: 'attempts', type: 'integer', default: 0 },
          millis('next_attempt_at'),
          millis('claimed_until', true),
          { name: 'last_error', type: 'text', isNullable: true },
          millis('created_at'),
        ],
        indices: [{ name: 'slack_messages_open', columnNames: ['closed', 'next_attempt_at'] }],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'slack_interactions',
        columns: [
          { ...text('key', '64'), isPrimary: true },
          { name: 'outcome', type: 'text', isNullable: true },
          millis('at'),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'slack_requests',
        columns: [{ ...text('signature', '128'), isPrimary: true }, millis('at')],
        indices: [{ name: 'slack_requests_at', columnNames: ['at'] }],
      }),
    );
    await queryRunner.addColumn(
      'outbox_events',
      new TableColumn({ name: 'slack_pending', type: 'integer', default: 1 }),
    );
    await queryRunner.query('UPDATE outbox_events SET slack_pending = 0');
    await queryRunner.query(
      'CREATE INDEX outbox_events_slack_pending ON outbox_events (id) WHERE slack_pending = 1',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX outbox_events_slack_pending');
    await queryRunner.dropColumn('outbox_events', 'slack_pending');
    for (const table of [
      'slack_requests',
      'slack_interactions',
      'slack_messages',
      'slack_link_codes',
      'slack_links',
    ])
      await queryRunner.dropTable(table);
  }
}
