/**
 * 200 concurrent submits and approvals from 3 agents and a reviewer over 2 environments:
 * the final state is exactly what the rules allow, with no lost update and no
 * transaction error.
 */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, type GqlResult, World } from './support/world.js';

let app: TestApp;
let world: World;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
});
afterAll(() => app.close());

const DOMAIN_CODES = new Set([
  'STALE_GENERATION',
  'LEASE_NOT_HELD',
  'INVALID_PLAN_STATE',
  'NOT_FOUND',
  'PRECONDITION_FAILED',
]);

// proves: R2, R3, R6, R8, R12
test('200 concurrent submits and approvals leave a state the rules allow', async () => {
  const agents = {
    a: await world.issue('agent-a', 'AGENT'),
    b: await world.issue('agent-b', 'AGENT'),
    c: await world.issue('agent-c', 'AGENT'),
  };
  const reviewer = await world.issue('reviewer', 'REVIEWER');
  await world.createEnvironment('mono', 'MONOTONIC');
  await world.createEnvironment('strict', 'STRICT');
  // Each agent gets a generation in each environment; only c's lease is still live.
  const generations: Record<string, Record<string, number>> = { mono: {}, strict: {} };
  for (const env of ['mono', 'strict']) {
    for (const name of ['a', 'b', 'c'] as const) {
      generations[env][name] = await world.acquire(agents[name], env, 5);
      if (name !== 'c') world.advance(6);
    }
  }

  let seed = 42; // mulberry32: a small seeded generator, so a failure can be replayed
  const random = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n) | 0;
  };
  type Call = {
    kind: 'submit' | 'approve';
    env: string;
    agent?: 'a' | 'b' | 'c';
    result?: GqlResult;
  };
  const calls: Call[] = [];
  for (let i = 0; i < 200; i++) {
    const env = random(2) ? 'mono' : 'strict';
    if (random(2)) {
      calls.push({ kind: 'submit', env, agent: (['a', 'b', 'c'] as const)[random(3)] });
    } else {
      calls.push({ kind: 'approve', env });
    }
  }
  await Promise.all(
    calls.map(async (call, i) => {
      if (call.kind === 'submit') {
        const agent = call.agent!;
        call.result = await world.submit(
          agents[agent],
          call.env,
          generations[call.env][agent],
          `plan ${i}`,
        );
      } else {
        // Reviewers click on whatever they see: some plans exist already, some not yet.
        const generation = [1, 2, 3][random(3)];
        call.result = await world.approve(reviewer, `${call.env}@${generation}.${1 + random(8)}`);
      }
    }),
  );

  const outcomes = new Set(calls.map((c) => `${c.env} ${c.kind} ${codeOf(c.result!)}`));
  // The mix really exercised both outcomes of both decisions in both environments.
  for (const expected of [
    'mono submit OK',
    'mono approve OK',
    'strict submit OK',
    'strict approve OK',
    'strict submit STALE_GENERATION',
    'mono approve NOT_FOUND',
  ]) {
    expect(outcomes).toContain(expected);
  }
  // Every answer is a success or a documented rejection: no INTERNAL, no transaction error.
  for (const call of calls) {
    const code = codeOf(call.result!);
    expect(code === 'OK' || DOMAIN_CODES.has(code)).toBe(true);
  }

  for (const env of ['mono', 'strict']) {
    const state = await world.environment(env);
    const plans = await world.plans(env);
    const accepted = calls.filter(
      (c) => c.env === env && c.kind === 'submit' && codeOf(c.result!) === 'OK',
    );
    const approved = calls.filter(
      (c) => c.env === env && c.kind === 'approve' && codeOf(c.result!) === 'OK',
    );

    // No lost update: every accepted submit is stored, sequences are contiguous per generation.
    expect(plans).toHaveLength(accepted.length);
    for (const generation of new Set(plans.map((p) => p.generation))) {
      const sequences = plans
        .filter((p) => p.generation === generation)
        .map((p) => p.sequence)
        .sort((x, y) => x - y);
      expect(sequences).toEqual(sequences.map((_, i) => i + 1));
    }
    // The fence is the highest accepted generation (MONOTONIC) or the last grant (STRICT).
    const highest = Math.max(0, ...plans.map((p) => p.generation));
    expect(state.fence).toBe(env === 'strict' ? 3 : highest);
    if (env === 'strict') expect(plans.every((p) => p.generation === 3)).toBe(true);

    // One published plan, the pointer's; it is the newest ever approved.
    const published = plans.filter((p) => p.status === 'PUBLISHED');
    expect(published.length).toBe(approved.length ? 1 : 0);
    if (approved.length) {
      expect(state.currentPlan?.id).toBe(published[0].id);
      const newestApproved = approved
        .map((c) => (c.result!.data as any).approvePlan)
        .sort((x, y) => y.generation - x.generation || y.sequence - x.sequence)[0];
      expect(state.currentPlan?.id).toBe(newestApproved.id);
      // Approvals succeeded in strictly increasing (generation, sequence) order.
      const superseded = plans.filter((p) => p.status === 'SUPERSEDED');
      expect(superseded.length).toBe(approved.length - 1);
    }
    // Statuses read as R8 says.
    for (const plan of plans) {
      const olderThanCurrent =
        state.currentPlan != null &&
        (plan.generation < state.currentPlan.generation ||
          (plan.generation === state.currentPlan.generation &&
            plan.sequence < state.currentPlan.sequence));
      if (plan.status === 'PROPOSED') {
        expect(plan.generation >= state.fence && !olderThanCurrent).toBe(true);
      }
      if (plan.status === 'OBSOLETE')
        expect(plan.generation < state.fence || olderThanCurrent).toBe(true);
    }
    // The audit log holds one event per decision.
    const events = (await world.auditEvents(env)).filter(
      (e) => e.action === 'SUBMIT_PLAN' || e.action === 'APPROVE_PLAN',
    );
    const decided = calls.filter((c) => c.env === env);
    expect(events).toHaveLength(decided.length);
    expect(events.filter((e) => e.outcome === 'ACCEPTED')).toHaveLength(
      accepted.length + approved.length,
    );
    // Its order is the decisions' order: oldest first, each accepted approval published a
    // plan after the one before it.
    const tokens = events
      .filter((e) => e.action === 'APPROVE_PLAN' && e.outcome === 'ACCEPTED')
      .reverse()
      .map((e) => e.planId!.split('@')[1].split('.').map(Number));
    const forward = tokens.every(
      ([generation, sequence], i) =>
        i === 0 ||
        generation > tokens[i - 1][0] ||
        (generation === tokens[i - 1][0] && sequence > tokens[i - 1][1]),
    );
    expect(forward).toBe(true);
  }
});

test("the service's own clock never starves a small connection pool under concurrent decisions", async () => {
  // On PostgreSQL the clock is the database's: it must answer on the transaction's own
  // connection, or 20 transactions on a pool of 2 would each wait for a third.
  const small = await startApp({ PLANFENCE_PG_POOL_SIZE: '2' }, null);
  try {
    const busy = new World(small);
    const agent = await busy.issue('agent', 'AGENT');
    await busy.createEnvironment('busy', 'STRICT', false);
    const generation = await busy.acquire(agent, 'busy', 600);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => busy.submit(agent, 'busy', generation, `plan ${i}`)),
    );
    expect(results.map(codeOf)).toEqual(Array(20).fill('OK'));
    expect((await busy.environment('busy')).currentPlan?.id).toBe(`busy@${generation}.20`);
  } finally {
    await small.close();
  }
}, 30_000);
