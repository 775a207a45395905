/**
 * Per-principal rate limits and per-environment quotas: a principal that sends too much
 * gets RATE_LIMITED {retryAfterSeconds} and its refused calls have no effect; others go
 * on. Each scenario runs a service with limits low enough to reach in a few requests.
 */
import { PlanfenceClient, RateLimitedError } from '../../src/client/index.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { startApp, type TestApp } from '../support/app.js';
import { holdQuotaClock } from '../support/quota-clock.js';
import { codeOf, ok, World } from '../support/world.js';

const apps: TestApp[] = [];
async function service(env: Record<string, string>): Promise<World> {
  const app = await startApp(env);
  apps.push(app);
  return new World(app);
}
afterAll(() => Promise.all(apps.map((app) => app.close())));

const WHOAMI = '{ whoami { name } }';

function retryAfterOf(result: { errors?: { extensions?: Record<string, any> }[] }): unknown {
  return result.errors?.[0]?.extensions?.retryAfterSeconds;
}

test('a burst beyond requests per second is RATE_LIMITED with retryAfterSeconds; others go on', async () => {
  const world = await service({
    PLANFENCE_RATE_REQUESTS_PER_SECOND: '1',
    PLANFENCE_RATE_REQUESTS_BURST: '4',
  });
  holdQuotaClock(world.app);
  const agent = await world.issue('agent', 'AGENT');
  const other = await world.issue('other', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC');

  // One request with many aliased fields is one request.
  const aliased = await world.gql(
    agent,
    `{ ${['a', 'b', 'c', 'd', 'e', 'f'].map((a) => `${a}: whoami { name }`).join(' ')} }`,
  );
  expect(ok(aliased).f).toEqual({ name: 'agent' });
  const results = [];
  for (let i = 0; i < 6; i++) results.push(await world.gql(agent, WHOAMI));

  const codes = results.map(codeOf);
  expect(codes.slice(0, 3)).toEqual(['OK', 'OK', 'OK']);
  expect(codes.at(-1)).toBe('RATE_LIMITED');
  const refused = results.find((r) => codeOf(r) === 'RATE_LIMITED')!;
  expect(Number.isInteger(retryAfterOf(refused))).toBe(true);
  expect(retryAfterOf(refused)).toBeGreaterThanOrEqual(1);
  expect(refused.errors![0].message).toContain('PLANFENCE_RATE_REQUESTS_PER_SECOND');
  expect(refused.data).toBeNull();

  // A refused request runs nothing: no generation is issued.
  const acquire = await world.acquireRaw(agent, 'prod', 60);
  expect(codeOf(acquire)).toBe('RATE_LIMITED');
  expect((await world.environment('prod')).lastIssuedGeneration).toBe(0);
  // Other principals have buckets of their own.
  expect(ok(await world.gql(other, WHOAMI)).whoami).toEqual({ name: 'other' });
  // Credentials are checked first: no token is UNAUTHENTICATED, not RATE_LIMITED.
  expect(codeOf(await world.gql(null, WHOAMI))).toBe('UNAUTHENTICATED');
});

test('each aliased mutation field is one write', async () => {
  const world = await service({
    PLANFENCE_RATE_WRITES_PER_SECOND: '1',
    PLANFENCE_RATE_WRITES_BURST: '6',
  });
  holdQuotaClock(world.app);
  const agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC');
  const generation = await world.acquire(agent, 'prod', 600);

  const renewals = Array.from(
    { length: 8 },
    (_, i) =>
      `r${i}: renewLease(input: { environment: "prod", generation: ${generation}, ttlSeconds: 600 }) { generation }`,
  );
  const result = await world.gql(agent, `mutation { ${renewals.join(' ')} }`);

  // The fields are non-null, so one refusal nulls the data; the audit log shows what ran.
  const renewed = (await world.auditEvents('prod')).filter((e) => e.action === 'RENEW_LEASE');
  expect(renewed.length).toBeGreaterThanOrEqual(5);
  expect(renewed.length).toBeLessThan(8);
  expect(renewed.every((e) => e.outcome === 'ACCEPTED')).toBe(true);
  // A refused non-null field ends the mutation: the fields after it do not run.
  expect(result.errors!.map((e) => e.extensions?.code)).toEqual(['RATE_LIMITED']);
  expect((result.errors![0] as { path?: unknown }).path).toEqual([`r${renewed.length}`]);
  // Reads are not writes.
  expect(ok(await world.gql(agent, WHOAMI)).whoami.name).toBe('agent');
});

describe('acquireLease aliases in one request', () => {
  let world: World;
  let agent: string;
  beforeAll(async () => {
    world = await service({ PLANFENCE_RATE_LEASES_PER_MINUTE: '5' });
    agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('prod', 'MONOTONIC');
    await world.createEnvironment('staging', 'MONOTONIC');
  });

  const acquires = (environment: string, n: number) =>
    `mutation { ${Array.from({ length: n }, (_, i) => `a${i}: acquireLease(input: { environment: "${environment}", ttlSeconds: 1 }) { generation }`).join(' ')} }`;

  test('burn at most the lease limit; the next one is RATE_LIMITED and ends the request', async () => {
    const result = await world.gql(agent, acquires('prod', 12));

    // The sixth is refused, and a refused non-null field ends the mutation there.
    expect(result.errors!.map((e) => [e.extensions?.code, (e as { path?: unknown }).path])).toEqual(
      [['RATE_LIMITED', ['a5']]],
    );
    expect((await world.environment('prod')).lastIssuedGeneration).toBe(5);
  });

  test('5,000 of them are refused and burn no more than the limit', async () => {
    const fresh = await world.issue('flooder', 'AGENT');

    const result = await world.gql(fresh, acquires('staging', 5000));

    // Refused as a whole by a cost limit (BAD_USER_INPUT) or from the sixth field on.
    expect(result.data).toBeNull();
    expect(result.errors!.length).toBeGreaterThan(0);
    for (const error of result.errors!) {
      expect(['RATE_LIMITED', 'BAD_USER_INPUT']).toContain(error.extensions?.code);
    }
    const burnt = (await world.environment('staging')).lastIssuedGeneration;
    expect(burnt).toBeLessThanOrEqual(5);
    // Only the grants made are audited; the refused fields left nothing.
    const audited = (await world.auditEvents('staging')).filter(
      (e) => e.action === 'ACQUIRE_LEASE',
    );
    expect(audited).toHaveLength(burnt);
    expect(audited.every((e) => e.outcome === 'ACCEPTED')).toBe(true);
  });
});

test('plan bytes per hour are counted per environment', async () => {
  const world = await service({
    PLANFENCE_MAX_PLAN_BYTES: '1000',
    PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR: '2500',
  });
  const agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC');
  await world.createEnvironment('staging', 'MONOTONIC');
  const g = await world.acquire(agent, 'prod', 3600);
  const gs = await world.acquire(agent, 'staging', 3600);
  const big = 'x'.repeat(1000);

  expect(codeOf(await world.submit(agent, 'prod', g, big))).toBe('OK');
  expect(codeOf(await world.submit(agent, 'prod', g, big))).toBe('OK');
  const refused = await world.submit(agent, 'prod', g, big);

  expect(codeOf(refused)).toBe('RATE_LIMITED');
  expect(refused.errors![0].message).toContain('PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR');
  // About 500 bytes are missing at 2500 bytes an hour: minutes, not seconds.
  expect(retryAfterOf(refused)).toBeGreaterThan(600);
  expect(await world.plans('prod')).toHaveLength(2);
  // What is left of the hour still takes a smaller plan; another environment has its own hour.
  expect(codeOf(await world.submit(agent, 'prod', g, 'y'.repeat(400)))).toBe('OK');
  expect(codeOf(await world.submit(agent, 'staging', gs, big))).toBe('OK');
  expect(await world.plans('prod')).toHaveLength(3);
});

test('a quota smaller than the largest plan stops the start, naming the variable', () => {
  expect(() =>
    loadConfig({ PLANFENCE_MAX_PLAN_BYTES: '1000', PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR: '999' }),
  ).toThrow(ConfigError);
  expect(() => loadConfig({ PLANFENCE_RATE_REQUESTS_PER_SECOND: '0' })).toThrow(
    /PLANFENCE_RATE_REQUESTS_PER_SECOND/,
  );
});

describe('the client', () => {
  let world: World;
  let agentToken: string;
  let generation: number;
  let clock: { advance(ms: number): void };
  beforeAll(async () => {
    world = await service({
      PLANFENCE_RATE_WRITES_PER_SECOND: '1',
      PLANFENCE_RATE_WRITES_BURST: '2',
    });
    clock = holdQuotaClock(world.app);
    agentToken = await world.issue('agent', 'AGENT');
    await world.createEnvironment('prod', 'MONOTONIC');
    generation = await world.acquire(agentToken, 'prod', 3600);
  });

  test('waits out RATE_LIMITED and sends the same submit again, which succeeds once', async () => {
    const bodies: string[] = [];
    const answers: string[] = [];
    const client = new PlanfenceClient({
      url: world.app.url,
      token: agentToken,
      fetch: async (url, init) => {
        bodies.push(init?.body as string);
        const response = await fetch(url, init);
        const answer = (await response.clone().json()) as Parameters<typeof retryAfterOf>[0];
        answers.push(JSON.stringify(answer));
        // The client waits retryAfterSeconds before it sends again: so does the limits' clock.
        const retryAfter = retryAfterOf(answer);
        if (typeof retryAfter === 'number') clock.advance(retryAfter * 1000);
        return response;
      },
    });
    // Drain the agent's writes: the acquire took one, this takes the other.
    await client.submitPlan({ environment: 'prod', generation, content: 'first' });
    bodies.length = 0;
    answers.length = 0;

    const plan = await client.submitPlan({ environment: 'prod', generation, content: 'second' });

    expect(plan.content).toBe('second');
    expect(answers.length).toBeGreaterThanOrEqual(2);
    expect(answers[0]).toContain('RATE_LIMITED');
    expect(answers.at(-1)).not.toContain('RATE_LIMITED');
    const keys = bodies.map((b) => JSON.parse(b).variables.input.idempotencyKey);
    expect(new Set(keys).size).toBe(1);
    const stored = (await world.plans('prod')).filter((p) => p.content === 'second');
    expect(stored).toHaveLength(1);
  });

  test('throws RateLimitedError when the wait is beyond its bound', async () => {
    const client = new PlanfenceClient({
      url: world.app.url,
      token: agentToken,
      retry: { maxRateLimitWaitMs: 10 },
    });
    await client
      .submitPlan({ environment: 'prod', generation, content: 'drain' })
      .catch(() => null);

    const error = await client
      .submitPlan({ environment: 'prod', generation, content: 'too soon' })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect((await world.plans('prod')).filter((p) => p.content === 'too soon')).toEqual([]);
  });
});
