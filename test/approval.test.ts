/** R5–R8, R13: approval is the publication step, and the pointer only moves forward. */
import { createHash } from 'node:crypto';
import { startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
let agent: string;
let reviewer: string;
let envs = 0;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
});
afterAll(() => app.close());

async function leasedEnvironment(
  requireApproval = true,
  mode: 'MONOTONIC' | 'STRICT' = 'MONOTONIC',
) {
  const env = `env-${++envs}`;
  await world.createEnvironment(env, mode, requireApproval);
  return { env, generation: await world.acquire(agent, env, 600) };
}

// proves: R5
test('approving publishes: the plan reads PUBLISHED and the pointer names it', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'apply: 3 changes', {
    title: 'rollout',
  });
  expect(plan).toMatchObject({
    id: `${env}@${generation}.1`,
    status: 'PROPOSED',
    title: 'rollout',
    submittedBy: 'agent',
  });
  expect(plan.contentHash).toBe(createHash('sha256').update('apply: 3 changes').digest('hex'));
  expect(plan).toMatchObject({ publishedAt: null, reviewedBy: null, basedOnPlanId: null });

  const approved = ok(await world.approve(reviewer, plan.id)).approvePlan;

  expect(approved).toMatchObject({ status: 'PUBLISHED', reviewedBy: 'reviewer' });
  expect(approved.publishedAt).not.toBeNull();
  expect((await world.environment(env)).currentPlan?.id).toBe(plan.id);
  const current = ok(
    await world.gql(reviewer, 'query($e: String!) { currentPlan(environment: $e) { id } }', {
      e: env,
    }),
  );
  expect(current.currentPlan.id).toBe(plan.id);
});

// proves: R6, R8
test('the previous published plan reads SUPERSEDED; passed-over proposals read OBSOLETE', async () => {
  const { env, generation } = await leasedEnvironment();
  const first = await world.submitOk(agent, env, generation, 'v1');
  ok(await world.approve(reviewer, first.id));
  const second = await world.submitOk(agent, env, generation, 'v2');
  const third = await world.submitOk(agent, env, generation, 'v3');
  expect([second.sequence, third.sequence]).toEqual([2, 3]);

  ok(await world.approve(reviewer, third.id));

  expect((await world.plan(first.id))?.status).toBe('SUPERSEDED');
  expect((await world.plan(second.id))?.status).toBe('OBSOLETE');
  expect((await world.plan(third.id))?.status).toBe('PUBLISHED');
  const late = await world.approve(reviewer, second.id);
  expect(codeOf(late)).toBe('INVALID_PLAN_STATE');
  expect(late.errors![0].extensions).toMatchObject({ status: 'OBSOLETE' });
  expect((await world.environment(env)).currentPlan?.id).toBe(third.id);
});

// proves: R5
test('approving twice is INVALID_PLAN_STATE with the status the plan has', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'v1');
  ok(await world.approve(reviewer, plan.id));
  const again = await world.approve(reviewer, plan.id);
  expect(codeOf(again)).toBe('INVALID_PLAN_STATE');
  expect(again.errors![0].extensions).toEqual({ code: 'INVALID_PLAN_STATE', status: 'PUBLISHED' });
});

// proves: R7
test('basedOnPlanId makes publication a compare-and-swap on the pointer', async () => {
  const { env, generation } = await leasedEnvironment();
  const base = await world.submitOk(agent, env, generation, 'base');
  ok(await world.approve(reviewer, base.id));
  const onBase = await world.submitOk(agent, env, generation, 'change on base', {
    basedOnPlanId: base.id,
  });
  const alsoOnBase = await world.submitOk(agent, env, generation, 'other change on base', {
    basedOnPlanId: base.id,
  });

  ok(await world.approve(reviewer, alsoOnBase.id));
  // onBase is older than the current plan now; a fresh one on the old base is refused by CAS.
  const stale = await world.submitOk(agent, env, generation, 'third on base', {
    basedOnPlanId: base.id,
  });
  const refused = await world.approve(reviewer, stale.id);

  expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
  expect(refused.errors![0].extensions).toEqual({
    code: 'PRECONDITION_FAILED',
    reason: 'CURRENT_PLAN',
    currentPlanId: alsoOnBase.id,
  });
  expect((await world.plan(stale.id))?.status).toBe('PROPOSED');
  expect((await world.plan(onBase.id))?.status).toBe('OBSOLETE');
  expect((await world.environment(env)).currentPlan?.id).toBe(alsoOnBase.id);
});

// proves: R13
test('a reviewer can pin the content they reviewed', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'reviewed text');
  const wrong = await world.approve(reviewer, plan.id, { contentHash: 'a'.repeat(64) });
  expect(codeOf(wrong)).toBe('PRECONDITION_FAILED');
  // The refusal names the hash the plan has, so the reviewer can read it again.
  expect(wrong.errors![0].extensions).toMatchObject({
    expectedContentHash: plan.contentHash,
    reviewedContentHash: 'a'.repeat(64),
  });
  expect(wrong.errors![0].message).toContain(`has content sha256 ${plan.contentHash}`);
  expect((await world.plan(plan.id))?.status).toBe('PROPOSED');
  const right = await world.approve(reviewer, plan.id, { contentHash: plan.contentHash });
  expect(ok(right).approvePlan.status).toBe('PUBLISHED');
});

// proves: R47
test('a reviewer can pin the deployment sequence they saw: once it moved, the approval is refused in its own statement and nothing is recorded', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'reviewed while nothing ran');
  const deployer = await world.issue(`deployer-${env}`, 'DEPLOYER');
  // Drift moves the deployment sequence from 0 to 1 (R53), as a deployment start would.
  ok(
    await world.gql(
      deployer,
      'mutation($e: String!) { reportDrift(environment: $e, detail: "a change by hand") { name } }',
      {
        e: env,
      },
    ),
  );
  const refused = await world.approve(reviewer, plan.id, { deploymentSequence: 0 });
  expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
  expect(refused.errors![0].extensions).toMatchObject({
    reason: 'DEPLOYMENT_SEQUENCE',
    deploymentSequence: 1,
  });
  expect(refused.errors![0].message).toContain('reviewed against deployment sequence 0');
  const approvals = async () =>
    ok(
      await world.gql<{ plan: { approvals: unknown[] } }>(
        reviewer,
        'query($id: ID!) { plan(id: $id) { approvals { approver } } }',
        { id: plan.id },
      ),
    ).plan.approvals;
  expect(await approvals()).toEqual([]);
  const accepted = await world.approve(reviewer, plan.id, { deploymentSequence: 1 });
  expect(ok(accepted).approvePlan.status).toBe('PUBLISHED');
});

test('each approval records the door it came through', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'approved over GraphQL');
  ok(await world.approve(reviewer, plan.id));
  const read = ok(
    await world.gql<{ plan: { approvals: { approver: string; via: string | null }[] } }>(
      reviewer,
      'query($id: ID!) { plan(id: $id) { approvals { approver via } } }',
      { id: plan.id },
    ),
  );
  expect(read.plan.approvals).toEqual([{ approver: 'reviewer', via: 'graphql' }]);
});

// proves: R13
test('nobody approves their own plan, not even an admin (four eyes)', async () => {
  const env = `env-${++envs}`;
  await world.createEnvironment(env, 'MONOTONIC');
  const generation = ok(await world.acquireRaw(world.admin, env, 30)).acquireLease.generation;
  const plan = await world.submitOk(world.admin, env, generation, 'admin plan');
  const self = await world.approve(world.admin, plan.id);
  expect(codeOf(self)).toBe('SELF_APPROVAL');
  expect((await world.plan(plan.id))?.status).toBe('PROPOSED');
  expect(ok(await world.approve(reviewer, plan.id)).approvePlan.status).toBe('PUBLISHED');
});

// proves: R5
test('rejecting a proposal records who and why; a rejected plan cannot be approved', async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'risky');
  const rejected = ok(await world.reject(reviewer, plan.id, 'drops the users table')).rejectPlan;
  expect(rejected).toMatchObject({
    status: 'REJECTED',
    reviewedBy: 'reviewer',
    rejectionReason: 'drops the users table',
  });
  const approve = await world.approve(reviewer, plan.id);
  expect(codeOf(approve)).toBe('INVALID_PLAN_STATE');
  expect(approve.errors![0].extensions).toMatchObject({ status: 'REJECTED' });
  const again = await world.reject(reviewer, plan.id, 'again');
  expect(codeOf(again)).toBe('INVALID_PLAN_STATE');
  expect(again.errors![0].extensions).toMatchObject({ status: 'REJECTED' });
  expect((await world.environment(env)).currentPlan).toBeNull();
});

// proves: R5, R12
test("a stale approval's message names the plan, its generation and the fence", async () => {
  const { env, generation } = await leasedEnvironment();
  const plan = await world.submitOk(agent, env, generation, 'built under the old lease');
  const next = await world.acquire(agent, env, 600);
  await world.submitOk(agent, env, next, 'built under the new lease');
  const stale = await world.approve(reviewer, plan.id);
  expect(codeOf(stale)).toBe('STALE_GENERATION');
  expect(stale.errors![0].message).toBe(
    `plan ${plan.id}'s generation ${generation} is below the fence ${next}`,
  );
});

test('approving or rejecting an unknown plan is NOT_FOUND', async () => {
  expect(codeOf(await world.approve(reviewer, 'nowhere@1.1'))).toBe('NOT_FOUND');
  expect(codeOf(await world.reject(reviewer, 'nowhere@1.1', 'no'))).toBe('NOT_FOUND');
});

describe('where no approval is required', () => {
  // proves: R5
  test('submitting publishes under the same rules', async () => {
    const { env, generation } = await leasedEnvironment(false);
    const first = await world.submitOk(agent, env, generation, 'v1');
    expect(first.status).toBe('PUBLISHED');
    expect(first.publishedAt).not.toBeNull();
    expect(first.reviewedBy).toBeNull();
    const second = await world.submitOk(agent, env, generation, 'v2', { basedOnPlanId: first.id });
    expect(second.status).toBe('PUBLISHED');
    expect((await world.plan(first.id))?.status).toBe('SUPERSEDED');
    expect((await world.environment(env)).currentPlan?.id).toBe(second.id);
  });

  // proves: R5, R7, R12
  test('a submit that cannot publish is rejected and nothing is stored', async () => {
    const { env, generation } = await leasedEnvironment(false);
    const first = await world.submitOk(agent, env, generation, 'v1');
    await world.submitOk(agent, env, generation, 'v2');

    const cas = await world.submit(agent, env, generation, 'v3 on v1', { basedOnPlanId: first.id });

    expect(codeOf(cas)).toBe('PRECONDITION_FAILED');
    // The pointer moved on, not the deployment sequence: no deploymentSequence.
    expect(cas.errors![0].extensions).toEqual({
      code: 'PRECONDITION_FAILED',
      reason: 'CURRENT_PLAN',
      currentPlanId: `${env}@${generation}.2`,
    });
    expect(cas.errors![0].message).toBe(`the current plan is no longer ${first.id}`);
    expect((await world.plans(env)).map((p) => p.id)).toEqual([`${env}@${generation}.2`, first.id]);
  });

  // proves: R7
  test('in STRICT mode, the live holder whose basedOnPlanId is stale gets PRECONDITION_FAILED', async () => {
    // Found by the model-based test: this was misreported as LEASE_NOT_HELD.
    const { env, generation } = await leasedEnvironment(false, 'STRICT');
    const first = await world.submitOk(agent, env, generation, 'v1');
    await world.submitOk(agent, env, generation, 'v2');
    const stale = await world.submit(agent, env, generation, 'v3', { basedOnPlanId: first.id });
    expect(stale.errors![0].extensions).toEqual({
      code: 'PRECONDITION_FAILED',
      reason: 'CURRENT_PLAN',
      currentPlanId: `${env}@${generation}.2`,
    });
  });

  // proves: R7
  test('in MONOTONIC mode, a stale basedOnPlanId is PRECONDITION_FAILED even after the lease expired', async () => {
    const env = `env-${++envs}`;
    await world.createEnvironment(env, 'MONOTONIC', false);
    const generation = await world.acquire(agent, env, 5);
    const first = await world.submitOk(agent, env, generation, 'v1');
    await world.submitOk(agent, env, generation, 'v2');
    world.advance(6);
    const stale = await world.submit(agent, env, generation, 'v3', { basedOnPlanId: first.id });
    expect(stale.errors![0].extensions).toEqual({
      code: 'PRECONDITION_FAILED',
      reason: 'CURRENT_PLAN',
      currentPlanId: `${env}@${generation}.2`,
    });
  });

  // proves: R3, R5
  test('in STRICT mode too', async () => {
    const { env, generation } = await leasedEnvironment(false, 'STRICT');
    expect((await world.submitOk(agent, env, generation, 'v1')).status).toBe('PUBLISHED');
    const next = await world.acquire(agent, env);
    expect(codeOf(await world.submit(agent, env, generation, 'old'))).toBe('STALE_GENERATION');
    expect((await world.submitOk(agent, env, next, 'v2')).status).toBe('PUBLISHED');
  });
});

test('plans page newest first by (generation, sequence), filtered by status', async () => {
  const { env, generation } = await leasedEnvironment();
  const made = [];
  for (let i = 0; i < 5; i++) made.push(await world.submitOk(agent, env, generation, `v${i}`));
  ok(await world.reject(reviewer, made[1].id, 'no'));
  const page = (after?: string) =>
    world.gql<{ plans: { id: string }[] }>(
      reviewer,
      'query($e: String!, $after: ID) { plans(environment: $e, first: 2, after: $after) { id } }',
      { e: env, after },
    );
  const first = ok(await page()).plans.map((p) => p.id);
  const second = ok(await page(first[1])).plans.map((p) => p.id);
  const third = ok(await page(second[1])).plans.map((p) => p.id);
  expect([...first, ...second, ...third]).toEqual(made.map((p) => p.id).reverse());
  expect((await world.plans(env, 'REJECTED')).map((p) => p.id)).toEqual([made[1].id]);
});
