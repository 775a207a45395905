import pg from 'pg';
import { FifoSemaphoresByKey } from '../src/common/fifo-semaphore.js';
import { codeOf, scratchDatabase, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

describe('turns by key', () => {
  test('each key has its own line, and a key whose last turn ended leaves nothing behind', async () => {
    const turns = new FifoSemaphoresByKey(1);
    const order: string[] = [];
    let openA!: () => void;
    const a1 = turns.run('a', () => new Promise<void>((resolve) => (openA = resolve)));
    const a2 = turns.run('a', () => {
      order.push('a2');
      return Promise.resolve();
    });
    // b has a line of its own: it does not wait behind a.
    await turns.run('b', () => {
      order.push('b');
      return Promise.resolve();
    });
    expect(order).toEqual(['b']);
    expect(turns.queued).toBe(1);
    openA();
    await Promise.all([a1, a2]);
    expect(order).toEqual(['b', 'a2']);
    expect(turns.queued).toBe(0);
    expect((turns as unknown as { lines: Map<string, unknown> }).lines.size).toBe(0);
  });

  test('a job that fails passes its turn on', async () => {
    const turns = new FifoSemaphoresByKey(1);
    const failed = turns.run('a', () => Promise.reject(new Error('no')));
    const next = turns.run('a', () => Promise.resolve('yes'));
    await expect(failed).rejects.toThrow('no');
    await expect(next).resolves.toBe('yes');
  });
});

/**
 * On PostgreSQL one environment's decisions reach the database at most
 * PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT at a time from an instance: the rest wait in the
 * service, in arrival order, holding no connection, and every one is still decided by the
 * database.
 */
const onPostgres = TEST_DATABASE === 'postgres' ? describe : describe.skip;

onPostgres('one environment’s decisions on PostgreSQL', () => {
  let database: { url: string; cleanup: () => Promise<void> };
  let app: TestApp;
  let world: World;
  let holder: pg.Client;
  /** Reads pg_stat_activity outside the holder's transaction (which would see one snapshot of it). */
  let observer: pg.Client;

  beforeAll(async () => {
    database = await scratchDatabase(true);
    app = await startApp(
      {
        DATABASE_URL: database.url,
        PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT: '2',
        PLANFENCE_PG_POOL_SIZE: '3',
      },
      null,
    );
    world = new World(app);
    holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    observer = new pg.Client({ connectionString: database.url });
    await observer.connect();
  });
  // A test that failed half-way must not leave the row held for the next.
  afterEach(() => holder.query('ROLLBACK'));
  afterAll(async () => {
    await holder?.query('ROLLBACK').catch(() => undefined);
    await holder?.end();
    await observer?.end();
    await app?.close();
    await database?.cleanup();
  });

  /** The service's transactions waiting for a lock (the holder's connection holds it). */
  async function waitingOnLocks(): Promise<number> {
    const { rows } = await observer.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    return rows[0].n;
  }

  test('a crowd of submits on one environment waits in the service, two in the database, and all are decided in order', async () => {
    const agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('crowded', 'STRICT', false);
    await world.createEnvironment('quiet', 'STRICT', false);
    const crowded = await world.acquire(agent, 'crowded', 600);
    const quiet = await world.acquire(agent, 'quiet', 600);

    // Something else holds the environment's row: the first decisions wait on it in PostgreSQL.
    await holder.query('BEGIN');
    await holder.query(`SELECT name FROM environments WHERE name = 'crowded' FOR UPDATE`);
    const submits = Array.from({ length: 6 }, (_, i) =>
      world.submit(agent, 'crowded', crowded, `plan ${i + 1}`),
    );
    await until(
      'two decisions waiting on the row and four in the service',
      async () =>
        (await waitingOnLocks()) === 2 &&
        (await metric(app.url, 'planfence_decisions_waiting')) === 4,
    );
    // The ones in the service hold no connection: a pool of three still decides elsewhere.
    const elsewhere = await world.submit(agent, 'quiet', quiet, 'a plan elsewhere');
    expect(codeOf(elsewhere)).toBe('OK');
    // And no more of the crowd reaches the database while the row is held.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await waitingOnLocks()).toBe(2);
    expect(await metric(app.url, 'planfence_decisions_waiting')).toBe(4);

    await holder.query('COMMIT');
    const results = await Promise.all(submits);
    expect(results.map(codeOf)).toEqual(Array(6).fill('OK'));
    const sequences = results
      .map((result) => Number(result.data!.submitPlan.id.split('.')[1]))
      .sort((a, b) => a - b);
    expect(sequences).toEqual([1, 2, 3, 4, 5, 6]);
    expect((await world.environment('crowded')).currentPlan?.id).toBe(`crowded@${crowded}.6`);
    expect(await metric(app.url, 'planfence_decisions_waiting')).toBe(0);
  }, 60_000);

  test('a stale submit waiting in the service is still refused by the database', async () => {
    const agent = await world.issue('agent-2', 'AGENT');
    await world.createEnvironment('fenced', 'STRICT', false);
    const old = await world.acquire(agent, 'fenced', 600);
    await holder.query('BEGIN');
    await holder.query(`SELECT name FROM environments WHERE name = 'fenced' FOR UPDATE`);
    const crowd = Array.from({ length: 4 }, (_, i) =>
      world.submit(agent, 'fenced', old, `old plan ${i + 1}`),
    );
    await until(
      'two decisions on the row and two in the service',
      async () =>
        (await waitingOnLocks()) === 2 &&
        (await metric(app.url, 'planfence_decisions_waiting')) === 2,
    );
    // A newer generation is issued while they wait (the row's holder fences them out).
    await holder.query(
      `UPDATE environments SET last_issued_generation = last_issued_generation + 1,
         fence = last_issued_generation + 1 WHERE name = 'fenced'`,
    );
    await holder.query('COMMIT');
    const results = await Promise.all(crowd);
    expect(results.map(codeOf)).toEqual(Array(4).fill('STALE_GENERATION'));
  }, 60_000);
});
