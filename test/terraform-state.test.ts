/**
 * DESIGN R56, R57: a plan with a plan file is bound to the Terraform state it was computed
 * from (lineage and serial, read from the file's tfstate entry). The applier reports the
 * state after each apply; a plan computed from an older state of that lineage is refused
 * PRECONDITION_FAILED {reason: STATE_SERIAL} at submit (nothing stored) and at start, and a
 * proposal turns OBSOLETE in the transaction that reports the newer state, whether or not
 * the agent named a deployment sequence.
 */
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { LINEAGE, planFileBase64 } from './support/plan-file.js';
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

const UPDATE = JSON.stringify({
  format_version: '1.2',
  terraform_version: '1.11.4',
  resource_changes: [
    {
      address: 'terraform_data.app',
      type: 'terraform_data',
      change: { actions: ['update'], before: { input: 'a' }, after: { input: 'b' } },
    },
  ],
});

interface Submitted {
  id: string;
  status: string;
  priorState: { lineage: string; serial: number } | null;
}

/** Submits a Terraform plan whose plan file was computed from state `serial` of `lineage`. */
function submitFrom(environment: string, generation: number, serial: number, lineage = LINEAGE) {
  return world.gql<{ submitPlan: Submitted }>(
    tokens.agent,
    'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status priorState { lineage serial } } }',
    {
      input: {
        environment,
        generation,
        content: UPDATE,
        contentType: 'TERRAFORM_PLAN_JSON',
        artifact: planFileBase64(serial, lineage),
        idempotencyKey: freshKey(),
      },
    },
  );
}

async function terraformState(environment: string) {
  const result = await world.gql<{
    environment: { terraformState: { lineage: string; serial: number } | null };
  }>(
    tokens.agent,
    'query($name: String!) { environment(name: $name) { terraformState { lineage serial } } }',
    {
      name: environment,
    },
  );
  return ok(result).environment.terraformState;
}

/** Deploys `planId` to the end, the applier reporting state `serial` of `lineage`. */
async function applied(environment: string, planId: string, serial: number, lineage = LINEAGE) {
  const started = await d.startOk(tokens.deployer, environment, planId);
  ok(await d.finish(tokens.deployer, started.id, 'SUCCEEDED', { state: { lineage, serial } }));
  return started;
}

// proves: R56, R57
test('two plans from the same state: once one is applied, the other turns OBSOLETE, and a submit from that state is refused with nothing stored', async () => {
  await world.createEnvironment('state', 'MONOTONIC', true);
  const generation = await world.acquire(tokens.agent, 'state', 600);
  const first = ok(await submitFrom('state', generation, 3)).submitPlan;
  const second = ok(await submitFrom('state', generation, 3)).submitPlan;
  expect(first.priorState).toEqual({ lineage: LINEAGE, serial: 3 });
  expect(await terraformState('state')).toBeNull();

  // The second is reviewed, published and applied: the state moves to serial 4.
  ok(await world.approve(tokens.reviewer, second.id));
  await applied('state', second.id, 4);
  expect(await terraformState('state')).toEqual({ lineage: LINEAGE, serial: 4 });

  // A third plan from state 3 was made before that apply and submitted after it.
  const stale = await submitFrom('state', generation, 3);
  expect(codeOf(stale)).toBe('PRECONDITION_FAILED');
  expect(stale.errors![0].extensions).toMatchObject({
    reason: 'STATE_SERIAL',
    priorStateSerial: 3,
    stateSerial: 4,
    lineage: LINEAGE,
  });
  expect(stale.errors![0].message).toMatch(/plan again/);
  const ids = (await world.plans('state')).map((plan) => plan.id);
  expect(ids).toHaveLength(2);
  expect(await world.auditEvents('state')).toContainEqual(
    expect.objectContaining({
      action: 'SUBMIT_PLAN',
      outcome: 'REJECTED',
      code: 'PRECONDITION_FAILED',
    }),
  );
  // The first, older than the published plan anyway, is OBSOLETE.
  expect((await world.plan(first.id))!.status).toBe('OBSOLETE');

  // A plan from the reported state is accepted and published.
  const fresh = ok(await submitFrom('state', generation, 4)).submitPlan;
  expect(ok(await world.approve(tokens.reviewer, fresh.id)).approvePlan.status).toBe('PUBLISHED');
});

// proves: R57
test('a proposal computed from the state an apply just moved past turns OBSOLETE in that transaction, audited', async () => {
  await world.createEnvironment('moved', 'MONOTONIC', true);
  const generation = await world.acquire(tokens.agent, 'moved', 600);
  const published = ok(await submitFrom('moved', generation, 1)).submitPlan;
  ok(await world.approve(tokens.reviewer, published.id));
  const started = await d.startOk(tokens.deployer, 'moved', published.id);
  // Submitted while the apply runs, from the state before it.
  const waiting = ok(await submitFrom('moved', generation, 1)).submitPlan;
  expect(waiting.status).toBe('PROPOSED');
  ok(
    await d.finish(tokens.deployer, started.id, 'SUCCEEDED', {
      state: { lineage: LINEAGE, serial: 2 },
    }),
  );
  expect((await world.plan(waiting.id))!.status).toBe('OBSOLETE');
  expect(await world.auditEvents('moved')).toContainEqual(
    expect.objectContaining({ action: 'PLAN_OBSOLETE', planId: waiting.id }),
  );
  const refused = await world.approve(tokens.reviewer, waiting.id);
  expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
});

// proves: R56
test('a published plan is not started again once its state has been applied past: STATE_SERIAL before anything runs', async () => {
  await world.createEnvironment('again', 'MONOTONIC', false);
  const generation = await world.acquire(tokens.agent, 'again', 600);
  const plan = ok(await submitFrom('again', generation, 5)).submitPlan;
  expect(plan.status).toBe('PUBLISHED');
  await applied('again', plan.id, 6);
  const refused = await d.start(tokens.deployer, 'again', plan.id);
  expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
  expect(refused.errors![0].extensions).toMatchObject({
    reason: 'STATE_SERIAL',
    currentPlanId: plan.id,
    priorStateSerial: 5,
    stateSerial: 6,
  });
  expect(await d.list('again')).toHaveLength(1);

  // Where no approval is needed, a submit from the old state is refused and publishes nothing.
  const stale = await submitFrom('again', generation, 5);
  expect(codeOf(stale)).toBe('PRECONDITION_FAILED');
  expect(stale.errors![0].extensions).toMatchObject({ reason: 'STATE_SERIAL' });
  expect((await d.environment('again')).currentPlan?.id ?? null).toBe(plan.id);
});

// proves: R56
test('a plan computed from no state is stale once a state was reported; another lineage is not compared', async () => {
  await world.createEnvironment('lineages', 'MONOTONIC', false);
  const generation = await world.acquire(tokens.agent, 'lineages', 600);
  // A workspace with no state yet: Terraform writes an empty lineage and serial 0.
  const first = ok(await submitFrom('lineages', generation, 0, '')).submitPlan;
  expect(first.priorState).toEqual({ lineage: '', serial: 0 });
  await applied('lineages', first.id, 1);
  const noState = await submitFrom('lineages', generation, 0, '');
  expect(codeOf(noState)).toBe('PRECONDITION_FAILED');
  expect(noState.errors![0].extensions).toMatchObject({ reason: 'STATE_SERIAL' });

  const other = ok(
    await submitFrom('lineages', generation, 0, 'a1b2c3d4-0000-4000-8000-000000000000'),
  ).submitPlan;
  expect(other.status).toBe('PUBLISHED');
});

// proves: R56
test('the reported state only moves forward within a lineage; a FAILED apply reports its state too', async () => {
  await world.createEnvironment('forward', 'MONOTONIC', false);
  const generation = await world.acquire(tokens.agent, 'forward', 600);
  const plan = ok(await submitFrom('forward', generation, 7)).submitPlan;
  const started = await d.startOk(tokens.deployer, 'forward', plan.id);
  ok(
    await d.finish(tokens.deployer, started.id, 'FAILED', {
      detail: 'partial apply',
      state: { lineage: LINEAGE, serial: 9 },
    }),
  );
  expect(await terraformState('forward')).toEqual({ lineage: LINEAGE, serial: 9 });

  const next = ok(await submitFrom('forward', generation, 9)).submitPlan;
  const second = await d.startOk(tokens.deployer, 'forward', next.id);
  ok(
    await d.finish(tokens.deployer, second.id, 'SUCCEEDED', {
      state: { lineage: LINEAGE, serial: 8 },
    }),
  );
  expect(await terraformState('forward')).toEqual({ lineage: LINEAGE, serial: 9 });
});

test.each([
  ['an empty lineage', { lineage: '', serial: 1 }],
  ['a lineage of 65 characters', { lineage: 'x'.repeat(65), serial: 1 }],
  ['a negative serial', { lineage: LINEAGE, serial: -1 }],
])('a finish that reports %s is refused with BAD_USER_INPUT', async (_, state) => {
  await world.createEnvironment(
    `bad-state-${state.lineage.length}-${state.serial}`,
    'MONOTONIC',
    false,
  );
  const environment = `bad-state-${state.lineage.length}-${state.serial}`;
  const generation = await world.acquire(tokens.agent, environment, 600);
  const plan = ok(await submitFrom(environment, generation, 1)).submitPlan;
  const started = await d.startOk(tokens.deployer, environment, plan.id);
  const refused = await d.finish(tokens.deployer, started.id, 'SUCCEEDED', { state });
  expect(codeOf(refused)).toBe('BAD_USER_INPUT');
  expect((await d.get(started.id))!.status).toBe('IN_PROGRESS');
});
