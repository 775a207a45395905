/**
 * The outbox keeps the indexes its readers use and no other: every event a decision records
 * adds an entry to each of them, in the decision's own commit. The dispatcher takes the
 * events not yet fanned out in id order, Slack the events it has not looked at in id order,
 * retention the events older than its cutoff; nothing reads events by environment.
 */
import { Database, select } from '../src/database/database.js';
import { startApp, TEST_DATABASE, type TestApp } from './support/app.js';

const KEPT = ['outbox_events_at', 'outbox_events_slack_pending', 'outbox_events_waiting'];

let app: TestApp;

beforeAll(async () => {
  app = await startApp();
});

afterAll(() => app.close());

async function outboxIndexes(): Promise<string[]> {
  const names = await app.get(Database).read((m) =>
    TEST_DATABASE === 'postgres'
      ? select<{ name: string }>(
          m,
          `SELECT i.relname AS name FROM pg_index x
             JOIN pg_class i ON i.oid = x.indexrelid
             JOIN pg_class t ON t.oid = x.indrelid
           WHERE t.relname = 'outbox_events' AND NOT x.indisprimary`,
        )
      : select<{ name: string }>(
          m,
          `SELECT name FROM pragma_index_list('outbox_events') WHERE origin = 'c'`,
        ),
  );
  return names.map(({ name }) => name).sort();
}

test('the outbox has an index for each of its readers, and none by environment', async () => {
  expect(await outboxIndexes()).toEqual(KEPT);
});

const onSqlite = TEST_DATABASE === 'sqlite' ? test : test.skip;

onSqlite('each reader of the outbox finds its events through its index (SQLite)', async () => {
  const plans = await app.get(Database).read(async (m) => {
    const plan = async (sql: string) =>
      (await select<{ detail: string }>(m, `EXPLAIN QUERY PLAN ${sql}`, { at: 0 }))
        .map(({ detail }) => detail)
        .join('; ');
    return {
      dispatcher: await plan(
        'SELECT id FROM outbox_events WHERE fanned_out = 0 ORDER BY id LIMIT 100',
      ),
      slack: await plan(
        'SELECT id, type, environment, plan_id FROM outbox_events WHERE slack_pending = 1 ORDER BY id LIMIT 100',
      ),
      retention: await plan('SELECT id FROM outbox_events WHERE at < :at'),
    };
  });
  expect(plans.dispatcher).toMatch(/USING (COVERING )?INDEX outbox_events_waiting\b/);
  expect(plans.slack).toMatch(/USING (COVERING )?INDEX outbox_events_slack_pending\b/);
  expect(plans.retention).toMatch(/USING (COVERING )?INDEX outbox_events_at\b/);
});
