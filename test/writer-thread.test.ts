/**
 * SQLite file: the common submits are decided and committed by a writer thread with a
 * connection of its own (src/fencing/submit-on-thread.ts), the other decisions by the
 * request thread's connection. What the thread stores must be what the request thread's
 * statements store, row for row and byte for byte: a webhook's body, a replayed call and
 * the audit log must not tell which thread decided. The same story runs on two services,
 * one with the thread and one without (PLANFENCE_SQLITE_WRITER_THREAD=0), on one clock.
 */
import Database from 'better-sqlite3';
import { createClient } from 'graphql-ws';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { pino } from 'pino';
import WebSocket from 'ws';
import { ManualClock } from '../src/common/clock.js';
import { Database as Storage } from '../src/database/database.js';
import { SqliteWriter, type WriterProgram } from '../src/database/sqlite-writer.js';
import { PlanWrites } from '../src/fencing/plan-writes.js';
import {
  ADMIN_TOKEN,
  codeOf,
  scratchDir,
  startApp,
  TEST_DATABASE,
  type TestApp,
} from './support/app.js';
import { submitRequest } from './support/guard-database.js';
import { metric } from './support/metrics.js';
import { subscribed } from './support/subscribed.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? test : test.skip;

const START = Date.UTC(2026, 4, 17, 9, 8, 7, 45);

/** The story: publishes, proposals, a replay, a rejection, expired proposals, a stale generation. */
async function story(app: TestApp, created: () => Promise<void>): Promise<string[]> {
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
  await created();
  const g1 = await world.acquire(agent, 'auto', 600);
  const first = await world.submit(agent, 'auto', g1, 'replicas: 1', {
    idempotencyKey: 'first',
    title: 'one replica',
    sourceRevision: 'a1b2c3',
  });
  outcomes.push(codeOf(first));
  // The same call again: replayed, not decided twice.
  outcomes.push(
    codeOf(
      await world.submit(agent, 'auto', g1, 'replicas: 1', {
        idempotencyKey: 'first',
        title: 'one replica',
        sourceRevision: 'a1b2c3',
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

/** What `read` reads from the database file, on a read-only connection of its own. */
function readFile<T>(file: string, read: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** Every row the story's decisions wrote, table by table, in their order. */
function rows(file: string): Record<string, unknown[]> {
  return readFile(file, (db) => ({
    plans: db.prepare('SELECT * FROM plans ORDER BY id').all(),
    environments: db.prepare('SELECT * FROM environments ORDER BY name').all(),
    audit: db.prepare('SELECT * FROM audit_events ORDER BY id').all(),
    outbox: db.prepare('SELECT * FROM outbox_events ORDER BY id').all(),
    idempotency: db
      .prepare('SELECT * FROM idempotency_records ORDER BY principal, idempotency_key')
      .all(),
  }));
}

onSqlite('the writer thread stores what the request thread stores, byte for byte', async () => {
  const dir = scratchDir();
  const run = async (name: string, env: Record<string, string>) => {
    const file = join(dir.path, `${name}.db`);
    const app = await startApp(
      { DATABASE_URL: `sqlite:${file}`, PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL', ...env },
      new ManualClock(START),
    );
    const client = createClient({
      url: `${app.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${ADMIN_TOKEN}` },
      retryAttempts: 0,
    });
    try {
      // What subscribers hear: every audit event, and every publication of "auto".
      const heard: unknown[] = [];
      const listen = (query: string) => () =>
        client.subscribe(
          { query },
          { next: (value) => heard.push(value), error: (e) => heard.push(e), complete: () => {} },
        );
      await subscribed(
        app.url,
        'activityRecorded',
        listen(
          'subscription { activityRecorded { id at environment actor action generation planId outcome code detail via } }',
        ),
      );
      const outcomes = await story(app, async () => {
        await subscribed(
          app.url,
          'planPublished',
          listen(
            'subscription { planPublished(environment: "auto") { id status generation sequence title contentHash sourceRevision submittedAt publishedAt submittedBy } }',
          ),
        );
      });
      const rowsNow = rows(file);
      const published = (rowsNow.audit as { outcome: string; plan_id: string | null }[]).filter(
        (row) => row.outcome === 'ACCEPTED' && row.plan_id?.startsWith('auto@'),
      ).length;
      await until(
        'every audit event and publication to be announced',
        () => heard.length >= rowsNow.audit.length + published,
        { progress: () => `${heard.length} of ${rowsNow.audit.length + published}` },
      );
      const onThread = await metric(app.url, 'planfence_writer_thread_writes_total');
      return { outcomes, onThread, rows: rowsNow, heard };
    } finally {
      await client.dispose();
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
    // Subscribers hear the same events, in the same order, whichever thread decided.
    expect(threaded.heard.length).toBeGreaterThan(20);
    expect(threaded.heard).toEqual(alone.heard);
    for (const table of Object.keys(alone.rows)) {
      expect({ table, rows: threaded.rows[table] }).toEqual({ table, rows: alone.rows[table] });
    }
  } finally {
    dir.cleanup();
  }
});

onSqlite('the thread is handed only the submits it decides', async () => {
  const dir = scratchDir();
  const app = await startApp({ DATABASE_URL: `sqlite:${join(dir.path, 'guard.db')}` });
  try {
    const submit = {
      ...submitRequest('any', 'agent', 1, 'x'),
      now: null,
      idempotency: { principal: 'agent', key: 'k' },
    };
    const writes = app.get(PlanWrites);
    const db = app.get(Storage);
    expect(db.writesOnThread).toBe(true);
    // A denial, rules of its policies, a deployment sequence: the guard's statements decide.
    for (const other of [
      { policy: { version: 0, results: [], denial: { policy: 'p', message: 'no' }, rules: [] } },
      { policy: { version: 0, results: [], rules: [{ group: 'ops', count: 1 }] } },
      { policy: { version: 0, results: [], rules: [] }, basedOnDeploymentSequence: 3 },
    ]) {
      await expect(
        writes.submitOnThread(
          db,
          { ...submit, ...other } as never,
          () => ({}) as never,
          () => {},
        ),
      ).rejects.toThrow('this submit is decided by admitPlan');
    }
    expect(await metric(app.url, 'planfence_writer_thread_writes_total')).toBe(0);
  } finally {
    await app.close();
    dir.cleanup();
  }
});

onSqlite(
  'a writer thread that stops loses no submit, and the request thread decides the next',
  async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'stops.db');
    const lines: string[] = [];
    const app = await startApp(
      { DATABASE_URL: `sqlite:${file}` },
      undefined,
      pino({ level: 'error' }, { write: (line: string) => lines.push(line) }),
    );
    try {
      const world = new World(app);
      const agent = await world.issue('agent-s', 'AGENT');
      await world.createEnvironment('stops', 'MONOTONIC', false);
      const generation = await world.acquire(agent, 'stops', 600);
      expect(await metric(app.url, 'planfence_writer_thread_up')).toBe(1);
      const submit = (i: number) =>
        world.submit(agent, 'stops', generation, `replicas: ${i}`, { idempotencyKey: `s-${i}` });
      // Forty submits in flight; once the first is answered, the thread ends as a crash of it
      // would (its JavaScript stops; a statement under way completes), with groups in it.
      const thread = (app.get(Storage) as unknown as { writer: { worker: Worker } }).writer.worker;
      const answers = Array.from({ length: 40 }, (_, i) => submit(i));
      await answers[0];
      await thread.terminate();
      const first = (await Promise.all(answers)).map(codeOf);
      // Each one is either answered, or refused INTERNAL: its group never told the request
      // thread whether it committed.
      expect(first.every((code) => code === 'OK' || code === 'INTERNAL')).toBe(true);
      expect(first).toContain('OK');
      expect(await metric(app.url, 'planfence_writer_thread_up')).toBe(0);
      const onThread = await metric(app.url, 'planfence_writer_thread_writes_total');
      expect(onThread).toBeGreaterThan(0);
      expect(lines.join('')).toContain('the writer thread stopped');
      // The call again, with its key: what committed is replayed, what did not is decided
      // now, on the request thread. Every submit ends stored exactly once.
      const retried = first.flatMap((code, i) => (code === 'OK' ? [] : [submit(i)]));
      expect((await Promise.all(retried)).map(codeOf).filter((code) => code !== 'OK')).toEqual([]);
      expect(codeOf(await submit(40))).toBe('OK');
      expect(await metric(app.url, 'planfence_writer_thread_writes_total')).toBe(onThread);
      const { plans, keys } = readFile(file, (db) => ({
        plans: db
          .prepare("SELECT content FROM plans WHERE environment = 'stops' ORDER BY sequence")
          .all() as { content: string }[],
        keys: db
          .prepare("SELECT COUNT(*) AS n FROM idempotency_records WHERE idempotency_key LIKE 's-%'")
          .get() as { n: number },
      }));
      expect(plans.map((p) => p.content).sort()).toEqual(
        Array.from({ length: 41 }, (_, i) => `replicas: ${i}`).sort(),
      );
      expect(keys.n).toBe(41);
    } finally {
      await app.close();
      dir.cleanup();
    }
  },
);

onSqlite(
  'a write of a group that throws is undone alone; the others of its group commit',
  async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'groups.db');
    const setup = new Database(file);
    setup.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)');
    setup.close();
    // A program that stores two notes, and throws after the first when told to; or ends the
    // transaction first, as SQLite does itself on a full disk.
    const program: WriterProgram<{ id: number; fail: boolean; end: boolean }, number> = {
      name: 'two-notes',
      sql: { insert: 'INSERT INTO notes (id, text) VALUES (:id, :text)', end: 'ROLLBACK' },
      run: (statement, sql, input) => {
        statement(sql.insert).run({ id: input.id, text: 'first' });
        if (input.end) {
          statement(sql.end).run();
          throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        }
        if (input.fail) throw Object.assign(new Error('told to fail'), { code: 'TOLD' });
        statement(sql.insert).run({ id: input.id + 1, text: 'second' });
        return input.id;
      },
    };
    const writer = new SqliteWriter(file, ['journal_mode = WAL']);
    await writer.start();
    try {
      const write = (id: number, fail = false, end = false) =>
        ({ program, input: { id, fail, end } }) as never;
      // Without a failure; then with one in the middle of the group.
      expect(await writer.commit([write(10), write(20)])).toEqual([{ value: 10 }, { value: 20 }]);
      const outcomes = await writer.commit([write(30), write(40, true), write(50)]);
      expect(outcomes[0]).toEqual({ value: 30 });
      expect((outcomes[1] as { error: Error }).error).toMatchObject({
        message: 'told to fail',
        code: 'TOLD',
      });
      expect(outcomes[2]).toEqual({ value: 50 });
      // A write that fails the transaction's constraints fails alone as well.
      const duplicate = await writer.commit([write(60), write(10)]);
      expect(duplicate[0]).toEqual({ value: 60 });
      expect((duplicate[1] as { error: Error }).error).toMatchObject({
        code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
      });
      // A write after which SQLite ended the transaction fails its whole group, with its own
      // error (not the savepoint's that no longer exists): nothing of the group is stored.
      await expect(writer.commit([write(70), write(80, false, true)])).rejects.toMatchObject({
        message: 'database or disk is full',
        code: 'SQLITE_FULL',
      });
    } finally {
      await writer.stop();
    }
    const ids = readFile(file, (db) =>
      (db.prepare('SELECT id FROM notes ORDER BY id').all() as { id: number }[]).map(
        (row) => row.id,
      ),
    );
    expect(ids).toEqual([10, 11, 20, 21, 30, 31, 50, 51, 60, 61]);
    dir.cleanup();
  },
);

/** A program that keeps the writer thread busy for `ms` milliseconds. */
const BUSY: WriterProgram<{ ms: number }, number> = {
  name: 'busy',
  sql: {},
  run: (_statement, _sql, input) => {
    const until = Date.now() + input.ms;
    while (Date.now() < until) {
      // The thread is busy.
    }
    return input.ms;
  },
};

onSqlite(
  'a group the thread has not answered when it is stopped is refused, not left waiting',
  async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'stopped.db');
    new Database(file).close();
    const writer = new SqliteWriter(file, ['journal_mode = WAL']);
    await writer.start();
    // The thread held longer than its stop's grace.
    const answer = writer.commit([{ program: BUSY, input: { ms: 10_000 } }]);
    await writer.stop(200);
    await expect(answer).rejects.toThrow(
      'the writer thread was stopped before it answered this group',
    );
    expect(writer.running).toBe(false);
    dir.cleanup();
  },
);

onSqlite(
  'the thread decides by the clock as it decides: a STRICT lease that expired while its submit waited is refused',
  async () => {
    const dir = scratchDir();
    // The service's own clock: the system's.
    const app = await startApp({ DATABASE_URL: `sqlite:${join(dir.path, 'clock.db')}` }, null);
    try {
      const world = new World(app);
      const agent = await world.issue('agent-c', 'AGENT');
      await world.createEnvironment('waits', 'STRICT', false);
      const db = app.get(Storage);
      expect(db.writesOnThread).toBe(true);
      // The lease lives for a second; the thread is then busy for a second and a half, with
      // the submit, sent while the lease lives, in line behind it.
      const generation = await world.acquire(agent, 'waits', 1);
      const held = db.writeOnThread(BUSY, { ms: 1_500 }, () => {});
      const late = await world.submit(agent, 'waits', generation, 'replicas: 2');
      await held;
      expect(codeOf(late)).toBe('LEASE_NOT_HELD');
      const current = await world.gql<{ currentPlan: { id: string } | null }>(
        agent,
        '{ currentPlan(environment: "waits") { id } }',
      );
      expect(current.data?.currentPlan).toBeNull();
    } finally {
      await app.close();
      dir.cleanup();
    }
  },
);
