/**
 * Model-based test of deployments: random sequences of submits (some made against a
 * deployment sequence, R33, some with a plan file computed from a Terraform state, R56, in
 * environments that publish at once or wait for a review, some requiring a check, R50, or a
 * deploy window, R52), approvals, check reports, drift reports (R53), starts, heartbeats,
 * finishes (some reporting the state after the apply), reconciles, time passing and
 * deployers that pause past their heartbeat and report late, run against the reference model
 * (test/model/deployments-model.ts) and the real service over HTTP. After every command the
 * answer (with PRECONDITION_FAILED's reason and what it compared), every deployment's
 * status, plan and reconciler, the active deployment, the deployed plan, the reported state,
 * every plan's status, and the plans audited PLAN_OBSOLETE (R57) must be the same.
 * FC_RUNS sets the number of runs.
 */
import fc from 'fast-check';
import {
  type CheckStatus,
  DeploymentsModel,
  type Outcome,
  type Preconditions,
  type State,
} from './model/deployments-model.js';
import { Database, select } from '../src/database/database.js';
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { codeOf, type GqlResult, ok, World } from './support/world.js';
import { type ModelRuns, modelRuns as runsOf } from './support/model-runs.js';
import { LINEAGE, planFileBase64 } from './support/plan-file.js';

/**
 * Each project replays runs of its own seeds, which reach every outcome the tests require
 * (support/model-runs.ts; FC_REACH=1 FC_RUNS=n FC_SEED=s finds others).
 */
const PLAIN = runsOf({ sqlite: { runs: 55, seed: 5 }, postgres: { runs: 45, seed: 12 } });
const WITH_PRECONDITIONS = runsOf({
  sqlite: { runs: 40, seed: 9 },
  postgres: { runs: 30, seed: 4 },
});

let app: TestApp;
let world: World;
let deployments: Deployments;
const tokens: Record<string, string> = {};
const DEPLOYERS = ['d1', 'd2'] as const;
/** R56: the lineage a state is replaced with now and then (Terraform's are UUIDs too). */
const OTHER_LINEAGE = 'b7a1c0de-5e4f-4a3b-9c2d-1e0f9a8b7c6d';
/** What Terraform writes in the plan file of a workspace that has no state yet. */
const NO_STATE: State = { lineage: '', serial: 0 };
/** A plan file goes with a Terraform plan (the service reads only its tfstate entry). */
const TERRAFORM_PLAN = JSON.stringify({
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

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  deployments = new Deployments(world);
  tokens.agent = await world.issue('agent', 'AGENT');
  tokens.r = await world.issue('r', 'REVIEWER');
  tokens.c = ok(
    await world.gql<{ issueToken: { token: string } }>(
      world.admin,
      'mutation { issueToken(name: "c", role: CHECKER) { token } }',
    ),
  ).issueToken.token;
  for (const name of DEPLOYERS) tokens[name] = await world.issue(name, 'DEPLOYER');
});
afterAll(() => app.close());

let runs = 0;
let keys = 0;
/** How often each kind of command ended with each code, and each status read, over all runs. */
const outcomes = new Map<string, number>();
const count = (kind: string) => outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);

type Command = fc.AsyncCommand<DeploymentsModel, World>;

/** An answer as the model states it (see its Answer). */
function answerOf(result: GqlResult, field: string): string {
  const code = codeOf(result);
  if (code === 'OK') return `OK ${(result.data as Record<string, { id: string }>)[field].id}`;
  const x = result.errors![0].extensions ?? {};
  if (code === 'INVALID_PLAN_STATE') return `${code}:${x.status}`;
  if (code !== 'PRECONDITION_FAILED') return code;
  switch (x.reason) {
    case 'CURRENT_PLAN':
      return `${code}:${x.reason}:${x.currentPlanId ?? 'none'}`;
    case 'DEPLOYMENT_SEQUENCE':
      return `${code}:${x.reason}:seq${x.deploymentSequence}`;
    case 'STATE_SERIAL':
      return `${code}:${x.reason}:${x.lineage}:${x.priorStateSerial}<${x.stateSerial}`;
    default:
      return `${code}:${x.reason}`;
  }
}

/** What an outcome is counted as: the code and, for PRECONDITION_FAILED and INVALID_PLAN_STATE, the reason or status. */
const kindOf = (answer: string) => answer.split(' ')[0].split(':').slice(0, 2).join(':');

async function expectSameState(model: DeploymentsModel): Promise<void> {
  const result = await world.gql<Record<string, any>>(
    world.admin,
    `query($name: String!) {
       environment(name: $name) { currentPlan { id } activeDeployment { id } deployedPlan { id } deploymentSequence
         terraformState { lineage serial } }
       deployments(environment: $name, first: 500) { id sequence status startedBy reconciledBy plan { id } }
       plans(environment: $name, first: 100) { id status basedOnDeploymentSequence priorState { lineage serial }
         pendingChecks }
     }`,
    { name: model.environment },
  );
  expect(result.errors).toBeUndefined();
  const active = model.active;
  expect(result.data!.environment).toEqual({
    currentPlan: model.currentPlan ? { id: model.currentPlan } : null,
    activeDeployment: active ? { id: active.id } : null,
    deployedPlan: model.deployedPlan ? { id: model.deployedPlan } : null,
    deploymentSequence: model.deploymentSequence,
    terraformState: model.state,
  });
  const expected = [...model.deployments].reverse().map((d) => ({
    id: d.id,
    sequence: d.sequence,
    status: model.statusOf(d),
    startedBy: d.startedBy,
    reconciledBy: d.reconciledBy,
    plan: { id: d.planId },
  }));
  expect(result.data!.deployments).toEqual(expected);
  for (const d of expected) count(`reads ${d.status}`);
  const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1);
  const plans = model.plans
    .map((p) => ({
      id: p.id,
      status: p.status,
      basedOnDeploymentSequence: p.basedOn,
      priorState: p.prior,
      // R50: the required check, while a PROPOSED plan's latest result is not SUCCESS.
      pendingChecks:
        p.status === 'PROPOSED' && model.preconditions.requiredCheck && p.check !== 'SUCCESS'
          ? ['scan']
          : [],
    }))
    .sort(byId);
  expect([...result.data!.plans].sort(byId)).toEqual(plans);
  for (const p of plans) count(`plans read ${p.status}`);
  const { events, obsoleted } = await app.get(Database).read(async (m) => ({
    events: await select<{ type: string; deployment_sequence: number }>(
      m,
      `SELECT type, deployment_sequence FROM outbox_events
         WHERE environment = :environment
           AND type IN ('deployment.started', 'deployment.finished', 'deployment.reconciled')
         ORDER BY id`,
      { environment: model.environment },
    ),
    // R57: each plan a deployment's start or a reported state turned OBSOLETE, audited once.
    obsoleted: await select<{ plan_id: string }>(
      m,
      `SELECT plan_id FROM audit_events WHERE environment = :environment AND action = 'PLAN_OBSOLETE'
         ORDER BY id`,
      { environment: model.environment },
    ),
  }));
  expect(
    events.map((e) => `${e.type} ${model.environment}#${Number(e.deployment_sequence)}`),
  ).toEqual(model.events);
  expect(obsoleted.map((row) => row.plan_id)).toEqual(model.obsoleted.map((o) => o.planId));
}

function command(
  describe: string,
  act: (model: DeploymentsModel) => Promise<{ expected: string; actual: string }>,
  /** When the command makes sense; the others are left out of the run. */
  check: (model: DeploymentsModel) => boolean = () => true,
): Command {
  return {
    check,
    async run(model) {
      const obsoleted = model.obsoleted.length;
      const { expected, actual } = await act(model);
      const verb = describe.split(' ')[1];
      count(`${verb} ${kindOf(actual)}`);
      for (const { by } of model.obsoleted.slice(obsoleted)) count(`proposals OBSOLETE by a ${by}`);
      expect(`${describe}: ${actual}`).toBe(`${describe}: ${expected}`);
      await expectSameState(model);
    },
    toString: () => describe,
  };
}

/** The deployment a command aims at: the newest, an older one, or one that does not exist. */
function target(model: DeploymentsModel, pick: number): string {
  const all = model.deployments;
  if (pick === 0 || !all.length) return `${model.environment}#${model.deploymentSequence + 1}`;
  return all[Math.max(0, all.length - pick)].id;
}

function pass(model: DeploymentsModel, ms: number): void {
  model.now += ms;
  app.clock.advance(ms);
}

const deployer = fc.constantFrom(...DEPLOYERS);
const outcome = fc.constantFrom<Outcome>('SUCCEEDED', 'FAILED');
const heartbeatSeconds = fc.constantFrom(5, 10, 30);
const aim = fc.constantFrom(0, 1, 1, 1, 2);

type Against = 'unbound' | 'the current sequence' | 'another sequence';
type From =
  | 'no plan file'
  | 'the reported state'
  | 'an older state'
  | 'a newer state'
  | 'no state'
  | 'another lineage';

/** R56: the state a plan file was computed from, chosen against the state last reported. */
function priorFor(model: DeploymentsModel, from: From): State | null {
  const reported = model.state;
  switch (from) {
    case 'no plan file':
      return null;
    case 'the reported state':
      return reported ?? NO_STATE;
    case 'an older state':
      return reported
        ? { lineage: reported.lineage, serial: Math.max(0, reported.serial - 1) }
        : { lineage: LINEAGE, serial: 1 };
    case 'a newer state':
      return { lineage: reported?.lineage ?? LINEAGE, serial: (reported?.serial ?? 0) + 1 };
    case 'no state':
      return NO_STATE;
    case 'another lineage':
      return { lineage: reported?.lineage === OTHER_LINEAGE ? LINEAGE : OTHER_LINEAGE, serial: 2 };
  }
}

/**
 * The agent submits a plan under a new generation (acquired, then released) or its newest;
 * unbound, or (R33) made against the environment's deployment sequence as it is now, or
 * against one that is no longer (or not yet) the environment's; with no plan file, or (R56)
 * with one computed from a state chosen against the one last reported.
 */
function submitting(
  generation: 'new' | 'same',
  against: Against,
  from: From,
  /** R51: the commit the plan was made from (undefined: none, as before §22). */
  revision?: string | null,
): Command {
  return command(
    `agent submits a plan (${generation} generation) made against ${against}, from ${from}${
      revision !== undefined ? `, of revision ${revision ?? 'none'}` : ''
    }`,
    async (model) => {
      const basedOn =
        against === 'unbound'
          ? null
          : against === 'the current sequence'
            ? model.deploymentSequence
            : model.deploymentSequence > 0
              ? model.deploymentSequence - 1
              : 1;
      const prior = priorFor(model, from);
      const acquires = generation === 'new' || model.generation === 0;
      const g = acquires ? await world.acquire(tokens.agent, model.environment) : model.generation;
      const plan = await world.gql(
        tokens.agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
        {
          input: {
            environment: model.environment,
            generation: g,
            idempotencyKey: `${model.environment}-submit-${++keys}`,
            basedOnDeploymentSequence: basedOn,
            ...(revision ? { sourceRevision: revision } : {}),
            ...(prior
              ? {
                  content: TERRAFORM_PLAN,
                  contentType: 'TERRAFORM_PLAN_JSON',
                  artifact: planFileBase64(prior.serial, prior.lineage),
                }
              : { content: 'plan' }),
          },
        },
      );
      if (acquires) await world.release(tokens.agent, model.environment, g);
      const expected = model.submit(generation, basedOn, prior, revision ?? null);
      const actual = answerOf(plan, 'submitPlan');
      // R57: refused at submit even where the plan would only have been proposed.
      if (model.requireApproval) count(`submits for review ${kindOf(actual)}`);
      return { expected, actual };
    },
  );
}

const submit = fc
  .record({
    generation: fc.constantFrom<'new' | 'same'>('new', 'new', 'same'),
    against: fc.constantFrom<Against>(
      'unbound',
      'unbound',
      'unbound',
      'the current sequence',
      'the current sequence',
      'another sequence',
    ),
    from: fc.constantFrom<From>(
      'no plan file',
      'no plan file',
      'the reported state',
      'the reported state',
      'the reported state',
      'an older state',
      'an older state',
      'a newer state',
      'no state',
      'another lineage',
    ),
  })
  .map(({ generation, against, from }) => submitting(generation, against, from));

/** The reviewer approves the newest plan or an older one; one approval publishes (R5). */
function approving(which: 'the newest plan' | 'an older plan'): Command {
  return command(
    `r approves ${which}`,
    async (model) => {
      const plan = which === 'the newest plan' ? model.plans.at(-1) : model.plans.at(-2);
      const id = plan?.id ?? `${model.environment}@99.1`;
      return {
        expected: model.approve(id),
        actual: answerOf(await world.approve(tokens.r, id), 'approvePlan'),
      };
    },
    (model) => model.requireApproval,
  );
}

const approve = fc
  .constantFrom<'the newest plan' | 'an older plan'>(
    'the newest plan',
    'the newest plan',
    'an older plan',
  )
  .map(approving);

const start = fc
  .record({
    d: deployer,
    plan: fc.constantFrom('current', 'current', 'current', 'older', 'missing'),
    key: fc.constantFrom('k1', 'k2', 'fresh', 'fresh', 'fresh'),
    hb: heartbeatSeconds,
  })
  .map(({ d, plan, key, hb }) =>
    command(`${d} starts the ${plan} plan (key ${key}, ${hb}s)`, async (model) => {
      const planId =
        plan === 'missing'
          ? `${model.environment}@99.1`
          : plan === 'older'
            ? (model.published.at(-2) ?? `${model.environment}@98.1`)
            : (model.currentPlan ?? `${model.environment}@97.1`);
      // Keys live as long as their records (24 h): each run has keys of its own.
      const idempotencyKey = `${model.environment}-${key === 'fresh' ? ++keys : key}`;
      return {
        expected: model.start(d, idempotencyKey, planId, hb),
        actual: answerOf(
          await deployments.start(tokens[d], model.environment, planId, {
            idempotencyKey,
            heartbeatSeconds: hb,
          }),
          'startDeployment',
        ),
      };
    }),
  );

const heartbeat = fc
  .record({ d: deployer, pick: aim, hb: heartbeatSeconds })
  .map(({ d, pick, hb }) =>
    command(`${d} heartbeats deployment -${pick} (${hb}s)`, async (model) => {
      const id = target(model, pick);
      return {
        expected: model.heartbeat(d, id, hb),
        actual: answerOf(await deployments.heartbeat(tokens[d], id, hb), 'heartbeatDeployment'),
      };
    }),
  );

type Report =
  'no state' | 'the same state' | 'a newer state' | 'an older state' | 'another lineage';

/** R56: the state an applier reports, chosen against the one last reported. */
function reported(model: DeploymentsModel, report: Report): State | null {
  const kept = model.state;
  switch (report) {
    case 'no state':
      return null;
    case 'the same state':
      return kept ?? { lineage: LINEAGE, serial: 1 };
    case 'a newer state':
      return { lineage: kept?.lineage ?? LINEAGE, serial: (kept?.serial ?? 0) + 1 };
    case 'an older state':
      return kept
        ? { lineage: kept.lineage, serial: kept.serial - 1 }
        : { lineage: LINEAGE, serial: 1 };
    case 'another lineage':
      return { lineage: kept?.lineage === OTHER_LINEAGE ? LINEAGE : OTHER_LINEAGE, serial: 1 };
  }
}

/** R56: a report of `state` leaves `kept` as it is (an older serial of its lineage). */
const keeps = (kept: State | null, state: State | null) =>
  kept != null && state?.lineage === kept.lineage && state.serial < kept.serial;

function finishDeployment(d: string, id: string, outcome: Outcome, state: State | null) {
  return world.gql<{ finishDeployment: { id: string } }>(
    tokens[d],
    'mutation($input: FinishDeploymentInput!) { finishDeployment(input: $input) { id } }',
    { input: { deploymentId: id, outcome, ...(state ? { state } : {}) } },
  );
}

const finish = fc
  .record({
    d: deployer,
    pick: aim,
    outcome,
    report: fc.constantFrom<Report>(
      'no state',
      'no state',
      'a newer state',
      'a newer state',
      'the same state',
      'an older state',
      'another lineage',
    ),
  })
  .map(({ d, pick, outcome, report }) =>
    command(`${d} finishes deployment -${pick} ${outcome} reporting ${report}`, async (model) => {
      const id = target(model, pick);
      const state = reported(model, report);
      const before = model.state;
      const expected = model.finish(d, id, outcome, state);
      if (expected.startsWith('OK') && keeps(before, state)) count('reports keep the state');
      return {
        expected,
        actual: answerOf(await finishDeployment(d, id, outcome, state), 'finishDeployment'),
      };
    }),
  );

/**
 * The runner's whole cycle in one command (DESIGN §15): it starts a deployment of the current
 * plan and, when that was accepted, finishes it at once reporting the state the apply left.
 */
const deploy = fc
  .record({
    d: deployer,
    outcome: fc.constantFrom<Outcome>('SUCCEEDED', 'SUCCEEDED', 'FAILED'),
    report: fc.constantFrom<Report>(
      'a newer state',
      'a newer state',
      'a newer state',
      'the same state',
      'an older state',
      'an older state',
      'another lineage',
    ),
  })
  .map(({ d, outcome, report }) =>
    command(`${d} deploys the current plan, ${outcome} reporting ${report}`, async (model) => {
      const planId = model.currentPlan ?? `${model.environment}@97.1`;
      const idempotencyKey = `${model.environment}-${++keys}`;
      const started = model.start(d, idempotencyKey, planId, 30);
      const actual = answerOf(
        await deployments.start(tokens[d], model.environment, planId, {
          idempotencyKey,
          heartbeatSeconds: 30,
        }),
        'startDeployment',
      );
      if (!started.startsWith('OK') || actual !== started) return { expected: started, actual };
      const id = started.slice('OK '.length);
      const state = reported(model, report);
      const before = model.state;
      const expected = model.finish(d, id, outcome, state);
      if (expected.startsWith('OK') && keeps(before, state)) count('reports keep the state');
      return {
        expected: `${started}, ${expected}`,
        actual: `${actual}, ${answerOf(await finishDeployment(d, id, outcome, state), 'finishDeployment')}`,
      };
    }),
  );

const reconcile = fc.record({ pick: aim, outcome }).map(({ pick, outcome }) =>
  command(`r reconciles deployment -${pick} ${outcome}`, async (model) => {
    const id = target(model, pick);
    return {
      expected: model.reconcile('r', id, outcome),
      actual: answerOf(
        await deployments.reconcile(tokens.r, id, outcome, 'checked the destination'),
        'reconcileDeployment',
      ),
    };
  }),
);

/** R50: the CHECKER reports the required check on the newest plan or an older one. */
const checkReport = fc
  .record({
    which: fc.constantFrom('the newest plan', 'the newest plan', 'an older plan'),
    status: fc.constantFrom<CheckStatus>('SUCCESS', 'SUCCESS', 'FAILURE', 'PENDING'),
  })
  .map(({ which, status }) =>
    command(
      `c reports scan ${status} on ${which}`,
      async (model) => {
        const plan = which === 'the newest plan' ? model.plans.at(-1) : model.plans.at(-2);
        const id = plan?.id ?? `${model.environment}@99.1`;
        return {
          expected: model.reportCheck(id, status),
          actual: answerOf(
            await world.gql(
              tokens.c,
              'mutation($input: ReportCheckInput!) { reportCheck(input: $input) { id } }',
              { input: { planId: id, name: 'scan', status } },
            ),
            'reportCheck',
          ),
        };
      },
      (model) => model.preconditions.requiredCheck,
    ),
  );

/** R51: submits of plans made from one of two revisions, or none. */
const submitWithRevision = fc
  .record({
    generation: fc.constantFrom<'new' | 'same'>('new', 'new', 'same'),
    against: fc.constantFrom<Against>('unbound', 'unbound', 'the current sequence'),
    revision: fc.constantFrom<string | null>('r1', 'r1', 'r2', null),
  })
  .map(({ generation, against, revision }) =>
    submitting(generation, against, 'no plan file', revision),
  );

/** R51: the upstream environment publishes a plan of a revision and deploys it to an outcome. */
const upstreamDeploy = fc
  .record({
    revision: fc.constantFrom('r1', 'r1', 'r2'),
    outcome: fc.constantFrom<Outcome>('SUCCEEDED', 'SUCCEEDED', 'FAILED'),
  })
  .map(({ revision, outcome }) =>
    command(
      `upstream deploys ${revision} ${outcome}`,
      async (model) => {
        const up = `${model.environment}-up`;
        const g = await world.acquire(tokens.agent, up);
        const { submitPlan } = ok(
          await world.gql<{ submitPlan: { id: string } }>(
            tokens.agent,
            'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
            {
              input: {
                environment: up,
                generation: g,
                content: `upstream ${revision}`,
                sourceRevision: revision,
                idempotencyKey: `${up}-${++keys}`,
              },
            },
          ),
        );
        await world.release(tokens.agent, up, g);
        const started = await deployments.startOk(tokens.d1, up, submitPlan.id, 30);
        ok(await deployments.finish(tokens.d1, started.id, outcome));
        model.upstreamFinished(revision, outcome);
        return { expected: 'OK', actual: 'OK' };
      },
      (model) => model.preconditions.promotionSoakMinutes != null,
    ),
  );

/** R53: the CHECKER reports drift. */
const drift = fc.constant(null).map(() =>
  command(`c reports drift`, async (model) => {
    const expected = model.drift();
    const result = await world.gql<{ reportDrift: { name: string } }>(
      tokens.c,
      'mutation($e: String!) { reportDrift(environment: $e, detail: "changed by hand") { name } }',
      { e: model.environment },
    );
    return {
      expected,
      actual: codeOf(result) === 'OK' ? `OK ${result.data!.reportDrift.name}` : codeOf(result),
    };
  }),
);

/** R52: long enough to close a deploy window. */
const longTime = fc.constant(null).map(() =>
  command(
    `10 minutes pass`,
    (model) => {
      pass(model, 600_000);
      return Promise.resolve({ expected: 'OK', actual: 'OK' });
    },
    (model) =>
      model.preconditions.deployWithinMinutes != null ||
      model.preconditions.promotionSoakMinutes != null,
  ),
);

const time = fc.constantFrom(1_000, 4_999, 9_000, 31_000).map((ms) =>
  command(`${ms} ms pass`, (model) => {
    pass(model, ms);
    return Promise.resolve({ expected: 'OK', actual: 'OK' });
  }),
);

/** The paused deployer of DESIGN §1, one level down: frozen past its heartbeat, it reports late. */
const pausedReport = fc.record({ d: deployer, outcome }).map(({ d, outcome }) =>
  command(`${d} pauses-then-finishes its newest deployment ${outcome}`, async (model) => {
    pass(model, 31_000);
    const id = target(model, 1);
    return {
      expected: model.finish(d, id, outcome),
      actual: answerOf(await deployments.finish(tokens[d], id, outcome), 'finishDeployment'),
    };
  }),
);

const weighted = [
  submit,
  submit,
  submit,
  approve,
  start,
  start,
  start,
  start,
  heartbeat,
  heartbeat,
  finish,
  finish,
  deploy,
  deploy,
  reconcile,
  reconcile,
  time,
  time,
  pausedReport,
];

/** With preconditions (DESIGN §22): the same commands, check and drift reports, and long waits. */
const withPreconditions = [
  ...weighted,
  checkReport,
  checkReport,
  drift,
  longTime,
  longTime,
  submitWithRevision,
  submitWithRevision,
  upstreamDeploy,
  upstreamDeploy,
];

/** DESIGN §22: a required check (R50) in some runs, a deploy window (R52) in others. */
const preconditions = fc.record({
  requiredCheck: fc.constantFrom(false, true, true),
  deployWithinMinutes: fc.constantFrom<number | null>(null, 15, 15),
  promotionSoakMinutes: fc.constantFrom<number | null>(null, 0, 10),
});

/** No preconditions: the runs of R18–R22, R33, R56, R57 as they were before §22. */
const none = fc.constant<Preconditions>({ requiredCheck: false, deployWithinMinutes: null });

/** Runs the model test with `commands` and `required` preconditions; every outcome of `reached` must come. */
async function modelRuns(
  commands: fc.Arbitrary<Command>[],
  required: fc.Arbitrary<Preconditions>,
  reached: string[],
  { runs: numRuns, seed, reachesEveryOutcome }: ModelRuns,
): Promise<void> {
  outcomes.clear();
  await fc.assert(
    fc.asyncProperty(
      // Most runs review their plans: there, proposals wait while deployments go on (R57).
      fc.constantFrom(true, true, false),
      required,
      fc.commands(commands, { maxCommands: 20, size: 'large' }),
      async (requireApproval, required: Preconditions, cmds) => {
        const name = `dm${++runs}`;
        await world.createEnvironment(name, 'MONOTONIC', requireApproval);
        const model = new DeploymentsModel(name, await app.clock.now(), requireApproval);
        // Every run begins with a published plan, so that most starts have something to
        // deploy: the plan of a workspace that has no state yet (R56). The preconditions are
        // set after it.
        await submitting('new', 'unbound', 'the reported state').run(model, world);
        if (requireApproval) await approving('the newest plan').run(model, world);
        model.preconditions = required;
        if (required.promotionSoakMinutes != null) {
          await world.createEnvironment(`${name}-up`, 'MONOTONIC', false);
          ok(
            await world.gql(
              world.admin,
              'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
              {
                input: {
                  environment: name,
                  promotion: { from: `${name}-up`, soakMinutes: required.promotionSoakMinutes },
                },
              },
            ),
          );
        }
        if (required.requiredCheck || required.deployWithinMinutes != null) {
          ok(
            await world.gql(
              world.admin,
              'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
              {
                input: {
                  environment: name,
                  requiredChecks: required.requiredCheck ? ['scan'] : [],
                  deployWithinMinutes: required.deployWithinMinutes ?? 0,
                },
              },
            ),
          );
        }
        await fc.asyncModelRun(() => ({ model, real: world }), cmds);
      },
    ),
    { numRuns, seed },
  );
  if (process.env.FC_STATS) console.log(Object.fromEntries([...outcomes].sort()));
  // Enough runs reach every outcome of every decision, and every status; fewer (FC_RUNS) may not.
  if (reachesEveryOutcome)
    for (const outcome of reached)
      expect({ [outcome]: (outcomes.get(outcome) ?? 0) > 0 }).toEqual({ [outcome]: true });
  for (const [kind, n] of outcomes) if (kind.endsWith('INTERNAL')) throw new Error(`${kind}: ${n}`);
}

// proves: R18, R19, R20, R21, R22, R33, R56, R57
test(`deployments behave as the reference model (${PLAIN.runs} runs)`, async () => {
  await modelRuns(
    weighted,
    none,
    [
      'starts OK',
      'starts PRECONDITION_FAILED:CURRENT_PLAN',
      'starts PRECONDITION_FAILED:DEPLOYMENT_SEQUENCE',
      'starts PRECONDITION_FAILED:STATE_SERIAL',
      'proposals OBSOLETE by a start',
      'proposals OBSOLETE by a report',
      'submits OK',
      'submits PRECONDITION_FAILED:DEPLOYMENT_SEQUENCE',
      'submits PRECONDITION_FAILED:STATE_SERIAL',
      'submits for review OK',
      'submits for review PRECONDITION_FAILED:DEPLOYMENT_SEQUENCE',
      'submits for review PRECONDITION_FAILED:STATE_SERIAL',
      'approves OK',
      'approves INVALID_PLAN_STATE:OBSOLETE',
      'approves STALE_GENERATION',
      'reports keep the state',
      'plans read PROPOSED',
      'plans read OBSOLETE',
      'plans read SUPERSEDED',
      'starts DEPLOYMENT_ACTIVE',
      'starts IDEMPOTENCY_KEY_REUSED',
      'heartbeats OK',
      'heartbeats DEPLOYMENT_NOT_ACTIVE',
      'heartbeats NOT_FOUND',
      'finishes OK',
      'finishes DEPLOYMENT_NOT_ACTIVE',
      'reconciles OK',
      'reconciles DEPLOYMENT_ACTIVE',
      'reconciles DEPLOYMENT_NOT_ACTIVE',
      'pauses-then-finishes OK',
      'pauses-then-finishes DEPLOYMENT_NOT_ACTIVE',
      'reads IN_PROGRESS',
      'reads UNKNOWN',
      'reads SUCCEEDED',
      'reads FAILED',
    ],
    PLAIN,
  );
}, 1_200_000);

// proves: R50, R51, R52, R53
test(`deployments with required checks, promotion, a deploy window and drift behave as the reference model (${WITH_PRECONDITIONS.runs} runs)`, async () => {
  await modelRuns(
    withPreconditions,
    preconditions,
    [
      'approves PRECONDITION_FAILED:PROMOTION',
      'reports OK',
      'reports INVALID_PLAN_STATE:PUBLISHED',
      'starts OK',
      'starts PRECONDITION_FAILED:DEPLOY_WINDOW',
      'proposals OBSOLETE by a drift',
      'plans read PROPOSED',
    ],
    WITH_PRECONDITIONS,
  );
}, 1_200_000);
