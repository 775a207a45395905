/**
 * DESIGN §4, every cell, both modes. A holds generation n and pauses; its lease
 * expires on the service's clock; B acquires n+1. What happens to A's old plan
 * depends only on the order of events and the environment's mode.
 */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, World } from './support/world.js';

let app: TestApp;
let world: World;
let agentA: string;
let agentB: string;
let reviewer: string;
let environments = 0;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agentA = await world.issue('agent-a', 'AGENT');
  agentB = await world.issue('agent-b', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
});
afterAll(() => app.close());

/** A fresh environment where A holds generation n and then pauses past its lease. */
async function aHoldsAndPauses(mode: 'MONOTONIC' | 'STRICT', requireApproval = true) {
  const env = `${mode.toLowerCase()}-${++environments}`;
  await world.createEnvironment(env, mode, requireApproval);
  const n = await world.acquire(agentA, env, 10);
  world.advance(11); // A is paused (GC, OS stall, slow model call) and its lease expires.
  return { env, n };
}

describe.each(['MONOTONIC', 'STRICT'] as const)('%s', (mode) => {
  // proves: R3
  test("a paused agent's plan is rejected after the next holder's first accepted write", async () => {
    const { env, n } = await aHoldsAndPauses(mode);
    const next = await world.acquire(agentB, env);
    expect(next).toBe(n + 1);
    await world.submitOk(agentB, env, next, 'plan by B');

    const late = await world.submit(agentA, env, n, 'plan by A, built before the pause');

    expect(codeOf(late)).toBe('STALE_GENERATION');
    expect(late.errors![0].extensions).toMatchObject({ generation: n, fence: n + 1 });
    expect((await world.plans(env)).map((p) => p.submittedBy)).toEqual(['agent-b']);
  });

  // proves: R3, R6
  test('a paused agent that arrives after the next grant but before its first write', async () => {
    const { env, n } = await aHoldsAndPauses(mode);
    const next = await world.acquire(agentB, env);

    const late = await world.submit(agentA, env, n, 'plan by A');

    if (mode === 'MONOTONIC') {
      // Accepted: ordered publication. But 81 can never follow 82.
      expect(codeOf(late)).toBe('OK');
      const planB = await world.submitOk(agentB, env, next, 'plan by B');
      const approveA = await world.approve(reviewer, late.data!.submitPlan.id);
      expect(codeOf(approveA)).toBe('STALE_GENERATION');
      expect(codeOf(await world.approve(reviewer, planB.id))).toBe('OK');
      expect((await world.environment(env)).currentPlan?.id).toBe(planB.id);
      expect((await world.plan(late.data!.submitPlan.id))?.status).toBe('OBSOLETE');
    } else {
      // STRICT: the grant itself raised the fence (authoritative handoff).
      expect(codeOf(late)).toBe('STALE_GENERATION');
      expect(late.errors![0].extensions).toMatchObject({ generation: n, fence: next });
      expect(await world.plans(env)).toEqual([]);
    }
  });

  // proves: R3, R11
  test('a paused agent whose lease expired while nobody else acquired', async () => {
    const { env, n } = await aHoldsAndPauses(mode);

    const late = await world.submit(agentA, env, n, 'plan by A');

    if (mode === 'MONOTONIC') {
      expect(codeOf(late)).toBe('OK');
      expect(late.data!.submitPlan).toMatchObject({
        generation: n,
        sequence: 1,
        status: 'PROPOSED',
      });
    } else {
      expect(codeOf(late)).toBe('LEASE_NOT_HELD');
      expect(await world.plans(env)).toEqual([]);
    }
    expect((await world.environment(env)).fence).toBe(n);
  });

  // proves: R5, R8
  test("a reviewer cannot approve A's plan once the fence passed it", async () => {
    const env = `${mode.toLowerCase()}-${++environments}`;
    await world.createEnvironment(env, mode);
    const n = await world.acquire(agentA, env, 10);
    const planA = await world.submitOk(agentA, env, n, 'plan by A, submitted in time');
    world.advance(11);
    const next = await world.acquire(agentB, env);
    await world.submitOk(agentB, env, next, 'plan by B');
    expect((await world.environment(env)).fence).toBe(next);

    const approval = await world.approve(reviewer, planA.id);

    expect(codeOf(approval)).toBe('STALE_GENERATION');
    expect(approval.errors![0].extensions).toMatchObject({ generation: n, fence: next });
    expect((await world.plan(planA.id))?.status).toBe('OBSOLETE');
    expect((await world.environment(env)).currentPlan).toBeNull();
  });

  // proves: R6
  test('the pointer never moves from an n+1 plan back to an n plan', async () => {
    const env = `${mode.toLowerCase()}-${++environments}`;
    await world.createEnvironment(env, mode);
    const n = await world.acquire(agentA, env, 10);
    const planA = await world.submitOk(agentA, env, n, 'plan by A');
    world.advance(11);
    const next = await world.acquire(agentB, env);
    const planB = await world.submitOk(agentB, env, next, 'plan by B');
    expect(codeOf(await world.approve(reviewer, planB.id))).toBe('OK');

    expect(codeOf(await world.approve(reviewer, planA.id))).toBe('STALE_GENERATION');
    expect(codeOf(await world.submit(agentA, env, n, 'again'))).toBe('STALE_GENERATION');

    const state = await world.environment(env);
    expect(state.currentPlan).toMatchObject({ id: planB.id, generation: next });
    const published = await world.plans(env, 'PUBLISHED');
    expect(published.map((p) => p.id)).toEqual([planB.id]);
  });

  // proves: R5, R6
  test('without approval, a paused agent cannot publish over the newer plan', async () => {
    const { env, n } = await aHoldsAndPauses(mode, false);
    const next = await world.acquire(agentB, env);
    const planB = await world.submitOk(agentB, env, next, 'plan by B');
    expect(planB.status).toBe('PUBLISHED');

    const late = await world.submit(agentA, env, n, 'plan by A');

    expect(codeOf(late)).toBe('STALE_GENERATION');
    expect((await world.environment(env)).currentPlan?.id).toBe(planB.id);
    expect(await world.plans(env)).toHaveLength(1);
  });
});

// proves: R12
test('every rejection above is in the audit log with its code', async () => {
  const { env, n } = await aHoldsAndPauses('STRICT');
  await world.acquire(agentB, env);
  await world.submit(agentA, env, n, 'late');

  const events = await world.auditEvents(env);

  expect(events[0]).toMatchObject({
    action: 'SUBMIT_PLAN',
    outcome: 'REJECTED',
    code: 'STALE_GENERATION',
    generation: n,
    actor: 'agent-a',
  });
  expect(events.map((e) => `${e.action}:${e.outcome}`)).toEqual([
    'SUBMIT_PLAN:REJECTED',
    'ACQUIRE_LEASE:ACCEPTED',
    'ACQUIRE_LEASE:ACCEPTED',
    'CREATE_ENVIRONMENT:ACCEPTED',
  ]);
});
