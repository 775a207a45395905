/**
 * A SQLite file's WAL is checkpointed by a thread of its own (PLANFENCE_SQLITE_CHECKPOINT_MS):
 * committed pages are copied back into the database file beside the request thread, below the
 * 4,000 pages at which the service's own connection then checkpoints on commit (1,000 without
 * the thread). Nothing is lost or changed by it: a restarted service reads every plan back.
 */
import { statSync } from 'node:fs';
import { Database } from '../src/database/database.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

const PAGES = 'planfence_sqlite_checkpointed_pages_total';

/** The WAL pages at which the service's own connection checkpoints on commit. */
async function walBound(app: TestApp): Promise<number> {
  const [row] = await app
    .get(Database)
    .dataSource.query<{ wal_autocheckpoint: number }[]>('PRAGMA wal_autocheckpoint');
  return row.wal_autocheckpoint;
}

/** Six plans of 100 KiB: a few hundred WAL pages, below the automatic checkpoint's 1,000. */
const contents = Array.from(
  { length: 6 },
  (_, i) => `plan ${i}\n` + `resource "r${i}" ${'x'.repeat(97)}\n`.repeat(800),
);

async function submitAll(app: TestApp): Promise<string[]> {
  const world = new World(app);
  const agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const generation = await world.acquire(agent, 'prod', 60);
  const ids: string[] = [];
  for (const content of contents)
    ids.push((await world.submitOk(agent, 'prod', generation, content)).id);
  return ids;
}

test('the checkpoint thread copies committed pages into the database file; a restart reads every plan back', async () => {
  const dir = scratchDir();
  const url = `sqlite:${dir.path}/planfence.db`;
  try {
    const app = await startApp({ DATABASE_URL: url, PLANFENCE_SQLITE_CHECKPOINT_MS: '20' });
    expect(await walBound(app)).toBe(4000);
    const before = statSync(`${dir.path}/planfence.db`).size;
    const ids = await submitAll(app);

    // Copied by the thread: the service's connection checkpoints only from 1,000 pages on.
    await until(
      'the checkpoint thread to copy 150 pages',
      async () => (await metric(app.url, PAGES)) >= 150,
    );
    expect(await metric(app.url, 'planfence_sqlite_checkpoints_total')).toBeGreaterThanOrEqual(1);
    expect(statSync(`${dir.path}/planfence.db`).size - before).toBeGreaterThan(600 * 1024);
    await app.close();

    const again = await startApp({ DATABASE_URL: url });
    const world = new World(again);
    for (const [i, id] of ids.entries()) expect((await world.plan(id))?.content).toBe(contents[i]);
    expect((await world.environment('prod')).currentPlan?.id).toBe(ids.at(-1));
    await again.close();
  } finally {
    dir.cleanup();
  }
});

test('with PLANFENCE_SQLITE_CHECKPOINT_MS=0 the pages stay in the WAL until the connection checkpoints', async () => {
  const dir = scratchDir();
  try {
    const app = await startApp({
      DATABASE_URL: `sqlite:${dir.path}/planfence.db`,
      PLANFENCE_SQLITE_CHECKPOINT_MS: '0',
    });
    expect(await walBound(app)).toBe(1000);
    const before = statSync(`${dir.path}/planfence.db`).size;
    await submitAll(app);
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(await metric(app.url, PAGES)).toBe(0);
    expect(statSync(`${dir.path}/planfence.db`).size).toBe(before);
    expect(statSync(`${dir.path}/planfence.db-wal`).size).toBeGreaterThan(600 * 1024);
    await app.close();
  } finally {
    dir.cleanup();
  }
});

test('PLANFENCE_SQLITE_CHECKPOINT_MS must be a number of milliseconds: the service does not start otherwise', async () => {
  const dir = scratchDir();
  try {
    for (const value of ['-1', 'often', '60001'])
      await expect(
        startApp({
          DATABASE_URL: `sqlite:${dir.path}/planfence.db`,
          PLANFENCE_SQLITE_CHECKPOINT_MS: value,
        }),
      ).rejects.toThrow(/PLANFENCE_SQLITE_CHECKPOINT_MS/);
  } finally {
    dir.cleanup();
  }
});
