/**
 * /health answers for the writes clients make, not only for its own probe: when real
 * writes fail for a storage reason (here a database that may not grow, as on a disk with
 * room for a small write and not for a plan), /health says 503 with the reason until a
 * real write commits again, even though the probe's tiny write still fits.
 */
import { Database } from '../../src/database/database.js';
import { codeOf, scratchDatabase, startApp, TEST_DATABASE, type TestApp } from '../support/app.js';
import { World } from '../support/world.js';

// SQLite's max_page_count caps the file as a full disk would; PostgreSQL has no such switch.
const onSqlite = TEST_DATABASE === 'sqlite' ? describe : describe.skip;

onSqlite('real writes fail while the probe still fits', () => {
  let app: TestApp;
  let world: World;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const database = await scratchDatabase();
    cleanup = database.cleanup;
    app = await startApp({
      DATABASE_URL: database.url,
      PLANFENCE_HEALTH_WRITE_FAILURE_SECONDS: '3600',
      // max_page_count below is the service connection's own: the plans go through it, not
      // the writer thread's (whose full disk storage-free-space.test.ts fills for real).
      PLANFENCE_SQLITE_WRITER_THREAD: '0',
    });
    world = new World(app);
  });
  afterAll(async () => {
    await app.close();
    await cleanup();
  });

  const pragma = (statement: string) =>
    app.get(Database).read((m) => m.query(`PRAGMA ${statement}`));
  const health = async () => {
    const response = await fetch(`${app.url}/health`);
    return { status: response.status, body: (await response.json()) as { reason?: string } };
  };

  test('/health is 503 after a plan could not be stored, and 200 once one is', async () => {
    await world.createEnvironment('prod', 'MONOTONIC', false);
    const agent = await world.issue('agent', 'AGENT');
    const generation = await world.acquire(agent, 'prod', 600);
    expect((await health()).status).toBe(200);

    const [{ page_count: pages }] = (await pragma('page_count')) as { page_count: number }[];
    await pragma(`max_page_count = ${pages}`);
    const big = 'x'.repeat(400 * 1024);
    expect(codeOf(await world.submit(agent, 'prod', generation, big))).toBe('STORAGE_UNAVAILABLE');
    const refused = await health();
    expect(refused.status).toBe(503);
    expect(refused.body.reason).toMatch(/disk is full/);
    // Asked again (the probe commits every time): still 503 while no real write has.
    expect((await health()).status).toBe(503);

    await pragma('max_page_count = 1073741823');
    expect(codeOf(await world.submit(agent, 'prod', generation, big))).toBe('OK');
    expect((await health()).status).toBe(200);
  });
});
