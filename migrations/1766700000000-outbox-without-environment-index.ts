import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox's index by environment goes: no statement of the service reads outbox events
 * by environment (the dispatcher takes them by id, retention by time, Slack by id), and every
 * event written added an entry to it. On SQLite that entry is a page of the WAL per commit,
 * one per environment a commit writes to: about five pages of forty in a commit of four
 * publishes spread over 100 environments (docs/performance.md).
 */
export class OutboxWithoutEnvironmentIndex1766700000000 implements MigrationInterface {
  name = 'OutboxWithoutEnvironmentIndex1766700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS outbox_events_environment');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE INDEX outbox_events_environment ON outbox_events (environment, id)',
    );
  }
}
