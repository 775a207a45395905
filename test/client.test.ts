/** The agent SDK against the real service. */
import {
  LeaseHeldError,
  LeaseNotGrantedError,
  LeaseNotHeldError,
  PlanfenceClient,
  QueueFullError,
  StaleGenerationError,
} from '../src/client/index.js';
import { startApp, type TestApp } from './support/app.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

let app: TestApp;
let world: World;
let agentToken: string;
let otherToken: string;
let envs = 0;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agentToken = await world.issue('agent', 'AGENT');
  otherToken = await world.issue('other', 'AGENT');
});
afterAll(() => app.close());

async function environment(mode: 'MONOTONIC' | 'STRICT' = 'STRICT', requireApproval = true) {
  const name = `client-${++envs}`;
  await world.createEnvironment(name, mode, requireApproval);
  return name;
}

test('withLease renews in the background and keeps the lease alive past several TTLs', async () => {
  const env = await environment();
  const client = new PlanfenceClient({ url: app.url, token: agentToken });
  const seen = await client.withLease(
    env,
    async ({ generation, signal }) => {
      // 8 s of service time under a 2-second lease: each second passes once the lease was
      // renewed after the one before (a renewal reaches 2 s past the moved clock).
      for (let i = 0; i < 8; i++) {
        app.clock.advance(1000);
        const now = await app.clock.now();
        await until('a renewal after the clock moved', async () => {
          const lease = (await client.environment(env))?.lease;
          return lease != null && Date.parse(lease.expiresAt) >= now + 2000;
        });
        expect(signal.aborted).toBe(false);
      }
      const held = await client.environment(env);
      expect(held?.lease?.generation).toBe(generation);
      const plan = await client.submitPlan({
        environment: env,
        generation,
        content: 'made under a live lease',
      });
      return { generation, plan };
    },
    { ttlSeconds: 2, renewEveryMs: 40 },
  );
  expect(seen.plan.generation).toBe(seen.generation);
  expect((await client.environment(env))?.lease).toBeNull(); // released at the end
});

test('withLease releases the lease as soon as the work settles, not at its next renewal', async () => {
  const env = await environment();
  const client = new PlanfenceClient({ url: app.url, token: agentToken });
  // The next renewal is due in 20 minutes: withLease must not wait for it (the test would
  // time out), and the lease is free as soon as it returns.
  const generation = await client.withLease(env, (lease) => Promise.resolve(lease.generation), {
    ttlSeconds: 3600,
  });
  expect(generation).toBeGreaterThan(0);
  expect((await client.environment(env))?.lease).toBeNull();
  const failed = await client
    .withLease(env, () => Promise.reject(new Error('the work failed')), { ttlSeconds: 3600 })
    .catch((error: unknown) => error);
  expect((failed as Error).message).toBe('the work failed');
  expect((await client.environment(env))?.lease).toBeNull();
}, 30_000);

// proves: R3, R10
test("a paused client's signal aborts, and its plan is rejected after another holder", async () => {
  const env = await environment('STRICT');
  const client = new PlanfenceClient({ url: app.url, token: agentToken });
  const other = new PlanfenceClient({ url: app.url, token: otherToken });

  const outcome = await client.withLease(
    env,
    async ({ generation, signal }) => {
      // The process stalls longer than its lease: no renewal gets through in time.
      app.clock.advance(3000);
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      const next = await other.acquireLease(env);
      const late = await client
        .submitPlan({ environment: env, generation, content: 'stale' })
        .catch((e: unknown) => e);
      return { reason: signal.reason as unknown, late, next };
    },
    { ttlSeconds: 2, renewEveryMs: 40 },
  );

  expect(outcome.reason).toBeInstanceOf(LeaseNotHeldError);
  expect(outcome.late).toBeInstanceOf(StaleGenerationError);
  expect((outcome.late as StaleGenerationError).fence).toBe(outcome.next.generation);
  expect((await other.environment(env))?.lease?.holder).toBe('other');
});

// proves: R9
test('a lost answer is retried with the same key: exactly one plan', async () => {
  const env = await environment('MONOTONIC');
  let failures = 0;
  // The first submit reaches the service, but its answer is lost on the way back.
  const flaky: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (typeof init?.body === 'string' && init.body.includes('submitPlan') && failures++ === 0) {
      throw new TypeError('socket hang up');
    }
    return response;
  };
  const client = new PlanfenceClient({
    url: app.url,
    token: agentToken,
    fetch: flaky,
    retry: { baseDelayMs: 5 },
  });
  const { generation } = await client.acquireLease(env);

  const plan = await client.submitPlan({ environment: env, generation, content: 'once' });

  expect(failures).toBe(2);
  expect(await client.plans(env)).toHaveLength(1);
  expect((await client.plans(env))[0].id).toBe(plan.id);
});

// proves: R10
test('fencing rejections are thrown at once, typed, never retried', async () => {
  const env = await environment('STRICT');
  let calls = 0;
  const counting: typeof fetch = (input, init) => {
    calls++;
    return fetch(input, init);
  };
  const client = new PlanfenceClient({ url: app.url, token: agentToken, fetch: counting });
  const old = await client.acquireLease(env);
  await client.acquireLease(env);
  calls = 0;
  const error = await client
    .submitPlan({ environment: env, generation: old.generation, content: 'old' })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(StaleGenerationError);
  expect(calls).toBe(1);

  const held = await new PlanfenceClient({ url: app.url, token: otherToken })
    .acquireLease(env)
    .catch((e: unknown) => e);
  expect(held).toBeInstanceOf(LeaseHeldError);
  expect((held as LeaseHeldError).holder).toBe('agent');
  expect((held as LeaseHeldError).expiresAt).toBeInstanceOf(Date);
});

test('queries: the current plan and the audit log', async () => {
  const env = await environment('MONOTONIC', false);
  const client = new PlanfenceClient({ url: app.url, token: agentToken });
  const { generation } = await client.acquireLease(env);
  const plan = await client.submitPlan({
    environment: env,
    generation,
    content: 'v1',
    title: 'first',
  });
  expect((await client.currentPlan(env))?.id).toBe(plan.id);
  const events = await client.auditEvents(env, { first: 2 });
  expect(events.map((e) => e.action)).toEqual(['SUBMIT_PLAN', 'ACQUIRE_LEASE']);
});

// proves: R37, R38
test('withLease with wait takes its turn in the queue and runs the work under the granted generation', async () => {
  const env = await environment('STRICT');
  const first = new PlanfenceClient({ url: app.url, token: agentToken });
  const second = new PlanfenceClient({ url: app.url, token: otherToken });
  const order: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const running = first.withLease(
    env,
    async ({ generation }) => {
      order.push(`first ${generation}`);
      await held;
    },
    { wait: { pollMs: 20 } },
  );
  while (!order.length) await sleep(10);
  await expect(second.acquireLease(env)).rejects.toBeInstanceOf(LeaseHeldError);
  const waiting = second.withLease(
    env,
    async ({ generation }) => {
      order.push(`second ${generation}`);
      return second.submitPlan({ environment: env, generation, content: 'my turn' });
    },
    { wait: { pollMs: 20 } },
  );
  while (
    !(
      await second.request<{ leaseQueue: unknown[] }>(
        `{ leaseQueue(environment: "${env}") { id } }`,
      )
    ).leaseQueue.length
  )
    await sleep(10);
  // While a ticket waits, nobody jumps the queue (R38).
  await expect(first.acquireLease(env)).rejects.toBeInstanceOf(LeaseHeldError);
  release();
  await running;
  const plan = await waiting;
  expect(order).toEqual(['first 1', 'second 2']);
  expect(plan.generation).toBe(2);

  // QUEUE_FULL and a ticket that ends unserved are typed.
  await world.gql(
    world.admin,
    `mutation { updateEnvironmentPolicy(input: { environment: "${env}", maxQueueLength: 1 }) { name } }`,
  );
  const lease = await first.acquireLease(env);
  const ticket = await second.enqueueLease(env, { maxWaitSeconds: 5 });
  expect(ticket).toMatchObject({ status: 'WAITING', position: 1 });
  const full = await first.enqueueLease(env).catch((error: unknown) => error);
  expect(full).toBeInstanceOf(QueueFullError);
  expect((full as QueueFullError).max).toBe(1);
  app.clock.advance(5000);
  const waitingLate = second
    .waitForLease(env, { pollMs: 20, maxWaitSeconds: 1 })
    .catch((error: unknown) => error);
  while (
    (
      await second.request<{ leaseQueue: { id: string }[] }>(
        `{ leaseQueue(environment: "${env}") { id } }`,
      )
    ).leaseQueue[0]?.id === ticket.id ||
    !(
      await second.request<{ leaseQueue: unknown[] }>(
        `{ leaseQueue(environment: "${env}") { id } }`,
      )
    ).leaseQueue.length
  )
    await sleep(10);
  app.clock.advance(1000);
  const late = await waitingLate;
  // The queue had room again (the first ticket expired); this one waits behind the live lease and expires too.
  expect(late).toBeInstanceOf(LeaseNotGrantedError);
  expect((late as LeaseNotGrantedError).ticket.status).toBe('EXPIRED');
  await first.releaseLease(env, lease.generation);
});
