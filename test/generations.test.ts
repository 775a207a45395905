/** R1, R4, R10: generations are issued only by grants, +1 each, durable, and cannot be forged. */
import { scratchDatabase, startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';

describe('on one running service', () => {
  let app: TestApp;
  let world: World;
  let agentA: string;
  let agentB: string;

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    agentA = await world.issue('agent-a', 'AGENT');
    agentB = await world.issue('agent-b', 'AGENT');
    await world.createEnvironment('prod', 'MONOTONIC');
    await world.createEnvironment('staging', 'STRICT');
  });
  afterAll(() => app.close());

  // proves: R1
  test('every grant issues the next generation, whoever takes it, per environment', async () => {
    const seen: number[] = [];
    for (const [token, env] of [
      [agentA, 'prod'],
      [agentB, 'prod'],
      [agentA, 'staging'],
      [agentA, 'prod'],
    ] as const) {
      const generation = await world.acquire(token, env, 5);
      seen.push(generation);
      world.advance(6);
    }
    expect(seen).toEqual([1, 2, 1, 3]);
    expect((await world.environment('prod')).lastIssuedGeneration).toBe(3);
  });

  // proves: R3, R10
  test('the same holder acquiring again gets a new generation, and its old one is fenced', async () => {
    const first = await world.acquire(agentA, 'staging');
    const second = await world.acquire(agentA, 'staging');
    expect(second).toBe(first + 1);
    expect(codeOf(await world.submit(agentA, 'staging', first, 'old'))).toBe('STALE_GENERATION');
    expect(codeOf(await world.submit(agentA, 'staging', second, 'new'))).toBe('OK');
  });

  // proves: R11
  test('a grant reports when it was acquired; a lease is over at exactly its expiry', async () => {
    world.advance(60);
    await world.createEnvironment('edge', 'MONOTONIC');
    const now = await app.clock.now();
    const lease = ok(await world.acquireRaw(agentA, 'edge', 5)).acquireLease;
    expect(new Date(lease.acquiredAt).getTime()).toBe(now);
    expect(new Date(lease.expiresAt).getTime()).toBe(now + 5000);
    world.advance(5);
    expect((await world.environment('edge')).lease).toBeNull();
    expect(codeOf(await world.acquireRaw(agentB, 'edge'))).toBe('OK');
  });

  // proves: R10
  test("another holder's live lease is LEASE_HELD with its holder and expiry", async () => {
    world.advance(60);
    const held = ok(await world.acquireRaw(agentA, 'prod', 30, 'worker-1')).acquireLease;
    expect(held.holder).toBe('agent-a/worker-1');

    const refused = await world.acquireRaw(agentB, 'prod');
    expect(codeOf(refused)).toBe('LEASE_HELD');
    expect(refused.errors![0].extensions).toEqual({
      code: 'LEASE_HELD',
      holder: 'agent-a/worker-1',
      expiresAt: held.expiresAt,
    });
    // Another principal is not told about instance labels.
    expect(refused.errors![0].message).toBe('environment "prod" is leased to agent-a/worker-1');
    // Another instance of the same principal is another holder, and is told why.
    const otherInstance = await world.acquireRaw(agentA, 'prod', 30, 'worker-2');
    expect(codeOf(otherInstance)).toBe('LEASE_HELD');
    expect(otherInstance.errors![0].message).toBe(
      `environment "prod" is leased to agent-a/worker-1; the instance label is part of the holder's identity, so agent-a/worker-2 is not agent-a/worker-1: ask with the same instance label as the lease was taken with, or wait until it is released or expires`,
    );
    const before = await world.environment('prod');
    expect(before.lastIssuedGeneration).toBe(held.generation);
  });

  // proves: R10
  test('renewing keeps the generation; renewing or releasing a lost lease is LEASE_NOT_HELD', async () => {
    world.advance(60);
    const generation = await world.acquire(agentA, 'prod', 10);
    world.advance(8);
    const renewed = ok(await world.renew(agentA, 'prod', generation, 10)).renewLease;
    expect(renewed.generation).toBe(generation);
    world.advance(8); // would have expired without the renewal
    expect((await world.environment('prod')).lease?.generation).toBe(generation);

    world.advance(3);
    expect(codeOf(await world.renew(agentA, 'prod', generation))).toBe('LEASE_NOT_HELD');
    expect(codeOf(await world.release(agentA, 'prod', generation))).toBe('LEASE_NOT_HELD');

    const next = await world.acquire(agentB, 'prod');
    expect(ok(await world.release(agentB, 'prod', next)).releaseLease).toBe(true);
    expect(codeOf(await world.release(agentB, 'prod', next))).toBe('LEASE_NOT_HELD');
    expect((await world.environment('prod')).lease).toBeNull();
  });

  // proves: R4
  test('a forged generation (never issued) is UNKNOWN_GENERATION and the fence does not move', async () => {
    const before = await world.environment('prod');
    for (const forged of [
      before.lastIssuedGeneration + 1,
      before.lastIssuedGeneration + 1000,
      2147483647,
    ]) {
      const result = await world.submit(agentA, 'prod', forged, 'forged');
      expect(codeOf(result)).toBe('UNKNOWN_GENERATION');
      expect(codeOf(await world.renew(agentA, 'prod', forged))).toBe('UNKNOWN_GENERATION');
    }
    const after = await world.environment('prod');
    expect(after.fence).toBe(before.fence);
    expect(after.lastIssuedGeneration).toBe(before.lastIssuedGeneration);
  });

  // proves: R4
  test("someone else's generation is UNKNOWN_GENERATION and the fence does not move", async () => {
    world.advance(60);
    const generationOfA = await world.acquire(agentA, 'prod');
    const before = await world.environment('prod');

    expect(codeOf(await world.submit(agentB, 'prod', generationOfA, 'borrowed token'))).toBe(
      'UNKNOWN_GENERATION',
    );
    expect(codeOf(await world.renew(agentB, 'prod', generationOfA))).toBe('UNKNOWN_GENERATION');
    expect(codeOf(await world.release(agentB, 'prod', generationOfA))).toBe('UNKNOWN_GENERATION');

    expect((await world.environment('prod')).fence).toBe(before.fence);
    expect((await world.environment('prod')).lease?.generation).toBe(generationOfA);
  });
});

// proves: R1
test('generations are never reused after a restart on the same database', async () => {
  const database = await scratchDatabase(true);
  const env = { DATABASE_URL: database.url };
  try {
    const first = await startApp(env);
    const world = new World(first);
    const agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('prod', 'STRICT');
    const issued = [await world.acquire(agent, 'prod'), await world.acquire(agent, 'prod')];
    const plan = await world.submitOk(agent, 'prod', issued[1], 'plan');
    await first.close();

    const second = await startApp(env);
    const again = new World(second);
    expect(await again.environment('prod')).toMatchObject({ fence: 2, lastIssuedGeneration: 2 });
    expect(await again.acquire(agent, 'prod')).toBe(3);
    expect((await again.plan(plan.id))?.content).toBe('plan');
    expect(codeOf(await again.submit(agent, 'prod', 2, 'old'))).toBe('STALE_GENERATION');
    await second.close();
  } finally {
    await database.cleanup();
  }
});
