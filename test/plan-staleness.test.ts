/**
 * DESIGN R33, R57: a plan made against the environment's deployment sequence n is stored,
 * published (approval, or a submit that publishes) and deployed only while the sequence is
 * still n. Once any deployment started after it, the state it was computed from is gone: a
 * submit is refused PRECONDITION_FAILED {reason: DEPLOYMENT_SEQUENCE, deploymentSequence}
 * with nothing stored, a proposal turns OBSOLETE in the transaction that started the
 * deployment, and the agent plans again.
 */
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
let d: Deployments;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  d = new Deployments(world);
  tokens.agent = await world.issue('agent', 'AGENT');
  tokens.reviewer = await world.issue('reviewer', 'REVIEWER');
  tokens.deployer = await world.issue('deployer', 'DEPLOYER');
});
afterAll(() => app.close());

function submitAgainst(environment: string, generation: number, basedOn: number | null) {
  return world.gql<{
    submitPlan: { id: string; status: string; basedOnDeploymentSequence: number };
  }>(
    tokens.agent,
    'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status basedOnDeploymentSequence } }',
    {
      input: {
        environment,
        generation,
        content: `plan against ${basedOn}`,
        idempotencyKey: freshKey(),
        basedOnDeploymentSequence: basedOn,
      },
    },
  );
}

async function deploymentSequence(environment: string): Promise<number> {
  const result = await world.gql<{ environment: { deploymentSequence: number } }>(
    tokens.agent,
    'query($name: String!) { environment(name: $name) { deploymentSequence } }',
    { name: environment },
  );
  return ok(result).environment.deploymentSequence;
}

/** The ids of the plans in the reviewer's queue. */
async function reviewQueue(): Promise<string[]> {
  const result = await world.gql<{ reviewQueue: { id: string }[] }>(
    tokens.reviewer,
    '{ reviewQueue(first: 500) { id } }',
  );
  return ok(result).reviewQueue.map((plan) => plan.id);
}

/** Publishes an unbound plan and runs one deployment of it to the end. */
async function deployOnce(environment: string): Promise<void> {
  const [plan] = await d.publish(environment, tokens.agent);
  const started = await d.startOk(tokens.deployer, environment, plan);
  ok(await d.finish(tokens.deployer, started.id, 'SUCCEEDED'));
}

test('Environment.deploymentSequence counts the deployments started (0: none yet)', async () => {
  await world.createEnvironment('counted', 'MONOTONIC', false);
  expect(await deploymentSequence('counted')).toBe(0);
  await deployOnce('counted');
  expect(await deploymentSequence('counted')).toBe(1);
});

// proves: R33
test('a submit that publishes is refused once a deployment started after its plan was made; nothing is stored', async () => {
  await world.createEnvironment('auto', 'MONOTONIC', false);
  const generation = await world.acquire(tokens.agent, 'auto', 600);
  // The agent plans against sequence 0; meanwhile another plan is published and deployed.
  await world.release(tokens.agent, 'auto', generation);
  await deployOnce('auto');

  const next = await world.acquire(tokens.agent, 'auto', 600);
  const refused = await submitAgainst('auto', next, 0);
  expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
  expect(refused.errors![0].extensions).toMatchObject({
    reason: 'DEPLOYMENT_SEQUENCE',
    deploymentSequence: 1,
  });
  expect(refused.errors![0].message).toMatch(/plan again/);
  expect((await world.plans('auto')).map((plan) => plan.id)).not.toContain(`auto@${next}.1`);

  const current = ok(await submitAgainst('auto', next, 1)).submitPlan;
  expect(current).toMatchObject({ status: 'PUBLISHED', basedOnDeploymentSequence: 1 });
  const audit = await world.auditEvents('auto');
  expect(audit).toContainEqual(
    expect.objectContaining({
      action: 'SUBMIT_PLAN',
      outcome: 'REJECTED',
      code: 'PRECONDITION_FAILED',
    }),
  );
});

// proves: R57
test('where approval is needed, a proposal turns OBSOLETE the moment a deployment starts, and a submit already behind is refused with nothing stored', async () => {
  await world.createEnvironment('reviewed', 'MONOTONIC', true);
  const generation = await world.acquire(tokens.agent, 'reviewed', 600);
  const other = await world.submitOk(tokens.agent, 'reviewed', generation, 'hotfix');
  ok(await world.approve(tokens.reviewer, other.id));
  // Made against sequence 0, after the current plan: publishable until a deployment starts.
  const proposed = ok(await submitAgainst('reviewed', generation, 0)).submitPlan;
  expect(proposed.status).toBe('PROPOSED');
  expect(await reviewQueue()).toContain(proposed.id);

  // A deployment of the plan that is current starts before the review ends.
  const started = await d.startOk(tokens.deployer, 'reviewed', other.id);
  expect((await world.plan(proposed.id))!.status).toBe('OBSOLETE');
  expect(await reviewQueue()).not.toContain(proposed.id);
  expect(await world.auditEvents('reviewed')).toContainEqual(
    expect.objectContaining({ action: 'PLAN_OBSOLETE', planId: proposed.id, outcome: 'ACCEPTED' }),
  );
  const refused = await world.approve(tokens.reviewer, proposed.id);
  expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
  expect(refused.errors![0].extensions).toMatchObject({ status: 'OBSOLETE' });
  // Not even an ADMIN's break-glass approval publishes a plan made against a state that is gone.
  const breakGlass = await world.approve(world.admin, proposed.id, { breakGlassReason: 'outage' });
  expect(codeOf(breakGlass)).toBe('INVALID_PLAN_STATE');

  // A submit made against the old sequence is refused at once; nothing is stored, and the
  // refusal is audited.
  const before = (await world.plans('reviewed')).length;
  const late = await submitAgainst('reviewed', generation, 0);
  expect(codeOf(late)).toBe('PRECONDITION_FAILED');
  expect(late.errors![0].extensions).toMatchObject({
    reason: 'DEPLOYMENT_SEQUENCE',
    deploymentSequence: started.sequence,
  });
  expect(await world.plans('reviewed')).toHaveLength(before);
  expect(await world.auditEvents('reviewed')).toContainEqual(
    expect.objectContaining({
      action: 'SUBMIT_PLAN',
      outcome: 'REJECTED',
      code: 'PRECONDITION_FAILED',
    }),
  );

  const fresh = ok(await submitAgainst('reviewed', generation, started.sequence)).submitPlan;
  expect(ok(await world.approve(tokens.reviewer, fresh.id)).approvePlan.status).toBe('PUBLISHED');
});

// proves: R33
test('a published plan is deployed only while the sequence is the one it was made against: after a failed apply, plan again', async () => {
  await world.createEnvironment('retry', 'MONOTONIC', false);
  const generation = await world.acquire(tokens.agent, 'retry', 600);
  const plan = ok(await submitAgainst('retry', generation, 0)).submitPlan;
  const first = await d.startOk(tokens.deployer, 'retry', plan.id);
  expect(first.sequence).toBe(1);
  ok(await d.finish(tokens.deployer, first.id, 'FAILED', { detail: 'partially applied' }));

  const again = await d.start(tokens.deployer, 'retry', plan.id);
  expect(codeOf(again)).toBe('PRECONDITION_FAILED');
  expect(again.errors![0].extensions).toMatchObject({
    reason: 'DEPLOYMENT_SEQUENCE',
    currentPlanId: plan.id,
    deploymentSequence: 1,
  });
  expect(again.errors![0].message).toMatch(/plan again/);
  expect(await d.list('retry')).toHaveLength(1);

  // An unbound plan keeps what R18 says: it may be deployed again.
  const unbound = ok(await submitAgainst('retry', generation, null)).submitPlan;
  await d.startOk(tokens.deployer, 'retry', unbound.id);
});
