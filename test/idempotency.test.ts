/** R9: a retry with the same key replays the first outcome and has no second effect. */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
let agent: string;
let other: string;
let reviewer: string;
let envs = 0;

beforeAll(async () => {
  app = await startApp({ PLANFENCE_IDEMPOTENCY_TTL_HOURS: '1' });
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  other = await world.issue('other', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
});
afterAll(() => app.close());

async function leasedEnvironment(
  mode: 'MONOTONIC' | 'STRICT' = 'MONOTONIC',
  requireApproval = true,
) {
  const env = `idem-${++envs}`;
  await world.createEnvironment(env, mode, requireApproval);
  return { env, generation: await world.acquire(agent, env, 3600) };
}

// proves: R9
test('a retry with the same key returns the same plan and creates nothing', async () => {
  const { env, generation } = await leasedEnvironment();
  const first = await world.submitOk(agent, env, generation, 'plan', {
    idempotencyKey: 'attempt-1',
    title: 't',
  });
  const retry = await world.submitOk(agent, env, generation, 'plan', {
    idempotencyKey: 'attempt-1',
    title: 't',
  });
  expect(retry).toEqual(first);
  expect(await world.plans(env)).toHaveLength(1);
  const submits = (await world.auditEvents(env)).filter((e) => e.action === 'SUBMIT_PLAN');
  expect(submits).toHaveLength(1);
});

// proves: R9
test('the same key with other content, title or generation is IDEMPOTENCY_KEY_REUSED', async () => {
  const { env, generation } = await leasedEnvironment();
  await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'k' });
  expect(
    codeOf(await world.submit(agent, env, generation, 'other plan', { idempotencyKey: 'k' })),
  ).toBe('IDEMPOTENCY_KEY_REUSED');
  expect(
    codeOf(await world.submit(agent, env, generation, 'plan', { idempotencyKey: 'k', title: 'x' })),
  ).toBe('IDEMPOTENCY_KEY_REUSED');
  const next = await world.acquire(agent, env);
  expect(codeOf(await world.submit(agent, env, next, 'plan', { idempotencyKey: 'k' }))).toBe(
    'IDEMPOTENCY_KEY_REUSED',
  );
  expect(await world.plans(env)).toHaveLength(1);
});

// proves: R9
test('keys are scoped per principal', async () => {
  const { env } = await leasedEnvironment();
  world.advance(3601);
  const generationOfOther = await world.acquire(other, env);
  const mine = await world.submitOk(other, env, generationOfOther, 'plan', {
    idempotencyKey: 'shared-key',
  });
  const env2 = (await leasedEnvironment()).env;
  const theirs = await world.submitOk(
    agent,
    env2,
    (await world.environment(env2)).lease!.generation,
    'plan',
    { idempotencyKey: 'shared-key' },
  );
  expect(theirs.id).not.toBe(mine.id);
});

// proves: R9
test('a replayed STALE_GENERATION stays the same error, even after the fence moved on', async () => {
  const { env, generation } = await leasedEnvironment('STRICT');
  const newer = await world.acquire(agent, env);
  const first = await world.submit(agent, env, generation, 'old plan', { idempotencyKey: 'late' });
  expect(first.errors![0].extensions).toEqual({
    code: 'STALE_GENERATION',
    generation,
    fence: newer,
  });
  const newest = await world.acquire(agent, env);

  const replay = await world.submit(agent, env, generation, 'old plan', { idempotencyKey: 'late' });

  expect(replay.errors).toEqual(first.errors);
  expect(newest).toBe(newer + 1);
  const rejections = (await world.auditEvents(env)).filter((e) => e.code === 'STALE_GENERATION');
  expect(rejections).toHaveLength(1);
});

// proves: R9
test('a replayed rejection stays a rejection even when a fresh attempt would now succeed', async () => {
  const { env, generation } = await leasedEnvironment();
  const early = await world.submit(agent, env, generation + 1, 'plan', { idempotencyKey: 'early' });
  expect(codeOf(early)).toBe('UNKNOWN_GENERATION');
  expect(await world.acquire(agent, env)).toBe(generation + 1);
  expect(
    codeOf(await world.submit(agent, env, generation + 1, 'plan', { idempotencyKey: 'early' })),
  ).toBe('UNKNOWN_GENERATION');
  expect(
    codeOf(await world.submit(agent, env, generation + 1, 'plan', { idempotencyKey: 'fresh' })),
  ).toBe('OK');
});

// proves: R9
test('approve and reject replay too', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'plan');
  const approved = ok(
    await world.approve(reviewer, plan.id, { idempotencyKey: 'click' }),
  ).approvePlan;
  const again = ok(await world.approve(reviewer, plan.id, { idempotencyKey: 'click' })).approvePlan;
  expect(again).toEqual(approved);
  expect(codeOf(await world.approve(reviewer, plan.id))).toBe('INVALID_PLAN_STATE');
  const other = await world.submitOk(agent, env, generation, 'plan 2');
  expect(codeOf(await world.reject(reviewer, other.id, 'no', { idempotencyKey: 'click' }))).toBe(
    'IDEMPOTENCY_KEY_REUSED',
  );
  const rejected = ok(
    await world.reject(reviewer, other.id, 'no', { idempotencyKey: 'click-2' }),
  ).rejectPlan;
  expect(
    ok(await world.reject(reviewer, other.id, 'no', { idempotencyKey: 'click-2' })).rejectPlan,
  ).toEqual(rejected);
});

// proves: R9
test('50 concurrent identical submits make exactly one plan', async () => {
  const { env, generation } = await leasedEnvironment();
  const results = await Promise.all(
    Array.from({ length: 50 }, () =>
      world.submit(agent, env, generation, 'same plan', { idempotencyKey: 'burst' }),
    ),
  );
  const ids = new Set(results.map((r) => ok(r).submitPlan.id));
  expect(ids.size).toBe(1);
  expect(await world.plans(env)).toHaveLength(1);
});

// proves: R9
test('a key used for another operation says which one', async () => {
  const { env, generation } = await leasedEnvironment('MONOTONIC');
  const plan = await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'shared' });
  const reused = await world.submit(agent, env, generation, 'other plan', {
    idempotencyKey: 'shared',
  });
  expect(reused.errors![0].message).toBe(
    'idempotency key "shared" was already used for a different submitPlan input',
  );
  ok(await world.reject(reviewer, plan.id, 'no', { idempotencyKey: 'reviewer-key' }));
  const crossed = await world.approve(reviewer, plan.id, { idempotencyKey: 'reviewer-key' });
  expect(codeOf(crossed)).toBe('IDEMPOTENCY_KEY_REUSED');
  expect(crossed.errors![0].message).toBe(
    'idempotency key "reviewer-key" was already used for rejectPlan',
  );
});

// proves: R9
test('a record expires at exactly the end of its retention period', async () => {
  const { env, generation } = await leasedEnvironment('MONOTONIC');
  const first = await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'edge' });
  world.advance(3600);
  const later = await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'edge' });
  expect(later.id).not.toBe(first.id);
});

// proves: R9
test('after the retention period a key can be used again', async () => {
  const { env, generation } = await leasedEnvironment('MONOTONIC');
  const first = await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'hourly' });
  world.advance(1800);
  expect(
    (await world.submitOk(agent, env, generation, 'plan', { idempotencyKey: 'hourly' })).id,
  ).toBe(first.id);
  world.advance(1801);
  const later = await world.submitOk(agent, env, generation, 'other plan', {
    idempotencyKey: 'hourly',
  });
  expect(later.id).not.toBe(first.id);
  expect(await world.plans(env)).toHaveLength(2);
});
