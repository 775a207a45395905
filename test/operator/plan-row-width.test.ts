/**
 * SQLite: a plan's status change does not write its content again. SQLite rewrites a whole
 * row, overflow pages included, when an UPDATE changes its size; a plan row keeps its size
 * whatever its status (migrations/1766600000000-plan-row-width.ts), so the publish that marks
 * a 1 MiB plan SUPERSEDED appends a few pages to the WAL, not a megabyte. Also on a database
 * made before that migration: its plans are kept, and the migration makes the table anew.
 *
 * The WAL is measured with the checkpoint thread off and far below the connection's own
 * checkpoint mark, so that it only grows.
 */
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_TOKEN, ok, scratchDir, startApp, TEST_DATABASE } from '../support/app.js';
import { World } from '../support/world.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? test : test.skip;

const MIB = 1024 * 1024;
const CURRENT_PLAN = `query($environment: String!) {
  currentPlan(environment: $environment) { id status contentHash content }
}`;
const PLAN_STATUS = 'query($id: ID!) { plan(id: $id) { status } }';

/** Publishes a 1 MiB plan, then a small one: the WAL's growth while the second supersedes the first. */
async function supersedeLargePlan(
  file: string,
  environment: string,
): Promise<{ grewBy: number; large: string }> {
  const app = await startApp({
    DATABASE_URL: `sqlite:${file}`,
    PLANFENCE_SQLITE_CHECKPOINT_MS: '0',
  });
  try {
    const world = new World(app);
    await world.createEnvironment(environment, 'MONOTONIC', false);
    const generation = await world.acquire(ADMIN_TOKEN, environment, 600);
    // Bytes that differ one from the next: content moved by a byte within the row would show.
    const content = randomBytes(MIB / 2).toString('hex');
    const large = await world.submitOk(ADMIN_TOKEN, environment, generation, content);
    expect(large.status).toBe('PUBLISHED');
    const before = statSync(`${file}-wal`).size;
    const small = await world.submitOk(ADMIN_TOKEN, environment, generation, 'replicas: 2');
    const grewBy = statSync(`${file}-wal`).size - before;
    expect(small.status).toBe('PUBLISHED');
    const { plan } = ok(
      await app.gql<{ plan: { status: string } }>(ADMIN_TOKEN, PLAN_STATUS, { id: large.id }),
    );
    expect(plan.status).toBe('SUPERSEDED');
    return { grewBy, large: large.id };
  } finally {
    await app.close();
  }
}

onSqlite('superseding a 1 MiB plan appends pages to the WAL, not the plan again', async () => {
  const dir = scratchDir();
  try {
    const { grewBy } = await supersedeLargePlan(join(dir.path, 'planfence.db'), 'row-width');
    // The small plan's rows, its events and the pages the status touched: tens of KiB.
    expect(grewBy).toBeGreaterThan(0);
    expect(grewBy).toBeLessThan(MIB / 4);
  } finally {
    dir.cleanup();
  }
});

onSqlite(
  "a database made before the migration keeps its plans, and gets the row's fixed width",
  async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'planfence.db');
    try {
      const { large } = await supersedeLargePlan(file, 'before');
      // The database as the release before this migration left it.
      const db = new Database(file);
      db.exec('ALTER TABLE plans DROP COLUMN status_width');
      db.prepare('DELETE FROM migrations WHERE name = ?').run('PlanRowWidth1766600000000');
      db.close();

      const app = await startApp({ DATABASE_URL: `sqlite:${file}` });
      try {
        const { currentPlan } = ok(
          await app.gql<{
            currentPlan: { id: string; status: string; contentHash: string; content: string };
          }>(ADMIN_TOKEN, CURRENT_PLAN, { environment: 'before' }),
        );
        expect(currentPlan).toMatchObject({ status: 'PUBLISHED', content: 'replicas: 2' });
        const { plan } = ok(
          await app.gql<{ plan: { status: string } }>(ADMIN_TOKEN, PLAN_STATUS, { id: large }),
        );
        expect(plan.status).toBe('SUPERSEDED');
      } finally {
        await app.close();
      }
      const after = new Database(file, { readonly: true });
      try {
        const columns = after.prepare('PRAGMA table_xinfo(plans)').all() as { name: string }[];
        expect(columns.map((c) => c.name)).toContain('status_width');
        const indexes = after
          .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'plans'")
          .all() as { name: string }[];
        expect(indexes.map((i) => i.name).sort()).toEqual([
          'plans_environment_generation_sequence',
          'plans_environment_status',
          'sqlite_autoindex_plans_1',
        ]);
        const widths = after
          .prepare('SELECT DISTINCT length(status) + length(status_width) AS width FROM plans')
          .all();
        expect(widths).toEqual([{ width: 16 }]);
        const { count } = after.prepare('SELECT count(*) AS count FROM plans').get() as {
          count: number;
        };
        expect(count).toBe(2);
      } finally {
        after.close();
      }
    } finally {
      dir.cleanup();
    }
  },
);
