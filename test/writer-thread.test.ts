/**
 * SQLite file: the common submits are decided and committed by a writer thread with a
 * connection of its own (src/fencing/submit-on-thread.ts), the other decisions by the
 * request thread's connection. What the thread stores must be what the request thread's
 * statements store, row for row and byte for byte: a webhook's body, a replayed call and
 * the audit log must not tell which thread decided. The same story runs on two services,
 * one with the thread and one without (PLANFENCE_SQLITE_WRITER_THREAD=0), on one clock.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { ManualClock } from '../src/common/clock.js';
import { codeOf, scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { World } from './support/world.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? test : test.skip;

const START = Date.UTC(2026, 4, 17, 9, 8, 7, 45);

/** The story: publishes, proposals, a replay, a rejection, expired proposals, a stale generation. */
async function story(app: TestApp): Promise<string[]> {
  const world = new World(app);
  const outcomes: string[] = [];
  // Keys of the story's own: both services see the same calls.
  let keys = 0;
  const key = () => ({ idempotencyKey: `story-${++keys}` });
  const agent = await world.issue('agent-w', 'AGENT');
  const other = await world.issue('agent-x', 'AGENT');
  await world.createEnvironment('auto', 'MONOTONIC', false);
  ok(
    await world.gql(
      world.admin,
      `mutation { createEnvironment(input: { name: "reviewed", mode: STRICT,
         requireApproval: true, proposalTtlSeconds: 60 }) { name } }`,
    ),
  );
  const g1 = await world.acquire(agent, 'auto', 600);
  const first = await world.submit(agent, 'auto', g1, 'replicas: 1', {
    idempotencyKey: 'first',
    title: 'one replica',
  });
  outcomes.push(codeOf(first));
  // The same call again: replayed, not decided twice.
  outcomes.push(
    codeOf(
      await world.submit(agent, 'auto', g1, 'replicas: 1', {
        idempotencyKey: 'first',
        title: 'one replica',
      }),
    ),
  );
  const second = await world.submit(agent, 'auto', g1, 'replicas: 2', {
    ...key(),
    basedOnPlanId: first.data!.submitPlan.id,
  });
  outcomes.push(codeOf(second));
  // basedOnPlanId no longer current: PRECONDITION_FAILED, named by the guard's statements.
  outcomes.push(
    codeOf(
      await world.submit(agent, 'auto', g1, 'replicas: 3', {
        ...key(),
        basedOnPlanId: first.data!.submitPlan.id,
      }),
    ),
  );
  // A newer generation fences the first holder out.
  world.advance(601);
  const g2 = await world.acquire(other, 'auto', 600);
  outcomes.push(codeOf(await world.submit(other, 'auto', g2, 'replicas: 4', key())));
  // Refused by the statements, which name the fence; the same call replayed; a new call of
  // that generation, refused by the thread below the fence the last refusal named.
  outcomes.push(codeOf(await world.submit(agent, 'auto', g1, 'late', { idempotencyKey: 'late' })));
  outcomes.push(codeOf(await world.submit(agent, 'auto', g1, 'late', { idempotencyKey: 'late' })));
  outcomes.push(codeOf(await world.submit(agent, 'auto', g1, 'later', key())));
  outcomes.push(codeOf(await world.submit(agent, 'auto', g1, 'later', key())));
  // The fence moves on: the thread declines to name the old one, the statements name the new.
  const g3 = await world.acquire(other, 'auto', 600);
  outcomes.push(codeOf(await world.submit(other, 'auto', g3, 'replicas: 5', key())));
  outcomes.push(codeOf(await world.submit(agent, 'auto', g1, 'latest', key())));
  outcomes.push(codeOf(await world.submit(agent, 'auto', g2, 'latest', key())));
  // Proposals that expire: the next submit announces them (plan.expired) before its own.
  const r1 = await world.acquire(agent, 'reviewed', 600);
  outcomes.push(codeOf(await world.submit(agent, 'reviewed', r1, 'proposal 1', key())));
  outcomes.push(codeOf(await world.submit(agent, 'reviewed', r1, 'proposal 2', key())));
  world.advance(61);
  outcomes.push(codeOf(await world.submit(agent, 'reviewed', r1, 'proposal 3', key())));
  return outcomes;
}

function ok(result: { errors?: unknown[] }): void {
  expect(result.errors).toBeUndefined();
}

/** Every row the story's decisions wrote, table by table, in their order. */
function rows(file: string): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    return {
      plans: db.prepare('SELECT * FROM plans ORDER BY id').all(),
      environments: db.prepare('SELECT * FROM environments ORDER BY name').all(),
      audit: db.prepare('SELECT * FROM audit_events ORDER BY id').all(),
      outbox: db.prepare('SELECT * FROM outbox_events ORDER BY id').all(),
      idempotency: db
        .prepare('SELECT * FROM idempotency_records ORDER BY principal, idempotency_key')
        .all(),
    };
  } finally {
    db.close();
  }
}

onSqlite('the writer thread stores what the request thread stores, byte for byte', async () => {
  const dir = scratchDir();
  const run = async (name: string, env: Record<string, string>) => {
    const file = join(dir.path, `${name}.db`);
    const app = await startApp(
      { DATABASE_URL: `sqlite:${file}`, PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL', ...env },
      new ManualClock(START),
    );
    try {
      const outcomes = await story(app);
      const onThread = await metric(app.url, 'planfence_writer_thread_writes_total');
      return { outcomes, onThread, rows: rows(file) };
    } finally {
      await app.close();
    }
  };
  try {
    const threaded = await run('threaded', {});
    const alone = await run('alone', { PLANFENCE_SQLITE_WRITER_THREAD: '0' });
    expect(threaded.outcomes).toEqual([
      'OK',
      'OK',
      'OK',
      'PRECONDITION_FAILED',
      'OK',
      'STALE_GENERATION',
      'STALE_GENERATION',
      'STALE_GENERATION',
      'STALE_GENERATION',
      'OK',
      'STALE_GENERATION',
      'UNKNOWN_GENERATION',
      'OK',
      'OK',
      'OK',
    ]);
    expect(alone.outcomes).toEqual(threaded.outcomes);
    // Every submit went to the thread. It admitted six (two publishes, the newer
    // generations' two, two proposals), refused two below the fence, and declined seven
    // (the two replays, the stale basedOnPlanId, the first refusal, the old fence, the
    // generation issued to another, the expired proposals), writing nothing of them.
    expect(threaded.onThread).toBe(15);
    expect(alone.onThread).toBe(0);
    expect(threaded.rows.outbox.map((row) => (row as { type: string }).type)).toContain(
      'plan.expired',
    );
    for (const table of Object.keys(alone.rows)) {
      expect({ table, rows: threaded.rows[table] }).toEqual({ table, rows: alone.rows[table] });
    }
  } finally {
    dir.cleanup();
  }
});
