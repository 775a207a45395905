/**
 * Group commit: on SQLite the writes that arrive together share one transaction and one
 * commit, each in a savepoint of its own. Every decision keeps its own outcome; a write
 * that fails rolls back alone.
 */
import type { EntityManager } from 'typeorm';
import { Database, execute, select } from '../src/database/database.js';
import { scratchDir, startApp, type TestApp, TEST_DATABASE } from './support/app.js';
import { metric } from './support/metrics.js';
import { codeOf, World } from './support/world.js';

let app: TestApp;
let world: World;
const dir = scratchDir();

beforeAll(async () => {
  // A file with synchronous=FULL on SQLite, as in production (not :memory:).
  app = await startApp(
    TEST_DATABASE === 'sqlite' ? { DATABASE_URL: `sqlite:${dir.path}/planfence.db` } : {},
  );
  world = new World(app);
});
afterAll(async () => {
  await app.close();
  dir.cleanup();
});

/** A counter's value on /metrics, which must have it. */
const counter = (name: string) => metric(app.url, name, { required: true });

// proves: R2
test('forty concurrent submits are all decided, each with its own sequence, none lost', async () => {
  const agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('together', 'MONOTONIC', false);
  const generation = await world.acquire(agent, 'together', 60);
  const [commitsBefore, writesBefore] = [
    await counter('planfence_commits_total'),
    await counter('planfence_committed_writes_total'),
  ];

  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      world.submit(agent, 'together', generation, `plan ${i}`, { idempotencyKey: `k${i}` }),
    ),
  );

  expect(results.map(codeOf)).toEqual(Array(40).fill('OK'));
  const ids = results.map((r) => r.data!.submitPlan.id);
  expect(new Set(ids).size).toBe(40);
  expect((await world.environment('together')).currentPlan?.id).toBe(`together@${generation}.40`);
  const commits = (await counter('planfence_commits_total')) - commitsBefore;
  const writes = (await counter('planfence_committed_writes_total')) - writesBefore;
  expect(writes).toBe(40);
  expect(commits).toBeGreaterThanOrEqual(1);
  expect(commits).toBeLessThanOrEqual(40);
});

test('writes issued together share one commit on SQLite (one transaction each on PostgreSQL)', async () => {
  const db = app.get(Database);
  const [commitsBefore, writesBefore] = [db.commits.transactions, db.commits.writes];
  await Promise.all(
    Array.from({ length: 10 }, (_, i) => db.write((m) => mark(m, `together-${i}`))),
  );
  expect(db.commits.writes - writesBefore).toBe(10);
  expect(db.commits.transactions - commitsBefore).toBe(TEST_DATABASE === 'sqlite' ? 1 : 10);
  expect(await marked('together-%')).toHaveLength(10);
});

test('more writes than one group holds are all committed, in further groups', async () => {
  const db = app.get(Database);
  const commitsBefore = db.commits.transactions;
  const queuedBefore = await counter('planfence_write_queue_seconds_total');
  await Promise.all(Array.from({ length: 300 }, (_, i) => db.write((m) => mark(m, `many-${i}`))));
  expect(await marked('many-%')).toHaveLength(300);
  const commits = db.commits.transactions - commitsBefore;
  const queued = (await counter('planfence_write_queue_seconds_total')) - queuedBefore;
  if (TEST_DATABASE === 'sqlite') {
    expect(commits).toBe(2);
    // The 44 beyond the first group waited at least for its commit.
    expect(queued).toBeGreaterThan(0);
  } else {
    expect(commits).toBe(300);
    expect(queued).toBe(0);
  }
});

// proves: R2, R12
test('a write that fails in a group rolls back alone; the writes around it commit', async () => {
  const db = app.get(Database);
  const outcomes = await Promise.allSettled([
    db.write((m) => mark(m, 'first')),
    db.write(async (m) => {
      await mark(m, 'failing');
      throw new Error('this write fails after its statement');
    }),
    db.write((m) => mark(m, 'third')),
  ]);

  expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect(await marked('first')).toHaveLength(1);
  expect(await marked('failing')).toHaveLength(0);
  expect(await marked('third')).toHaveLength(1);
});

/** A row only the write that made it can have made (an audit event of a test environment). */
function mark(m: EntityManager, actor: string): Promise<number> {
  return execute(
    m,
    `INSERT INTO audit_events (at, environment, actor, action, outcome)
     VALUES (0, 'group', :actor, 'TEST', 'ACCEPTED')`,
    { actor },
  );
}

function marked(actor: string): Promise<unknown[]> {
  return app.get(Database).read((m) =>
    select(m, `SELECT id FROM audit_events WHERE environment = 'group' AND actor LIKE :actor`, {
      actor,
    }),
  );
}
