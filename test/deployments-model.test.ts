/**
 * Model-based test of deployments: random sequences of publications (some made against a
 * deployment sequence, R33), starts, heartbeats,
 * finishes, reconciles, time passing and deployers that pause past their heartbeat and
 * report late, run against the reference model (test/model/deployments-model.ts) and the
 * real service over HTTP. After every command the answer and every deployment's status,
 * plan and reconciler, the active deployment and the deployed plan must be the same.
 * FC_RUNS sets the number of runs.
 */
import fc from 'fast-check';
import { DeploymentsModel, type Outcome } from './model/deployments-model.js';
import { Database, select } from '../src/database/database.js';
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { codeOf, type GqlResult, World } from './support/world.js';
import { MODEL_RUNS, MODEL_SEED } from './support/model-runs.js';

const RUNS = MODEL_RUNS;

let app: TestApp;
let world: World;
let deployments: Deployments;
const tokens: Record<string, string> = {};
const DEPLOYERS = ['d1', 'd2'] as const;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  deployments = new Deployments(world);
  tokens.agent = await world.issue('agent', 'AGENT');
  tokens.r = await world.issue('r', 'REVIEWER');
  for (const name of DEPLOYERS) tokens[name] = await world.issue(name, 'DEPLOYER');
});
afterAll(() => app.close());

let runs = 0;
let keys = 0;
/** How often each kind of command ended with each code, and each status read, over all runs. */
const outcomes = new Map<string, number>();
const count = (kind: string) => outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);

type Command = fc.AsyncCommand<DeploymentsModel, World>;

function answerOf(result: GqlResult, field: string): string {
  const code = codeOf(result);
  if (code === 'OK') return `OK ${(result.data as Record<string, { id: string }>)[field].id}`;
  const sequence = result.errors![0].extensions?.deploymentSequence;
  return sequence !== undefined ? `${code}:seq${sequence}` : code;
}

async function expectSameState(model: DeploymentsModel): Promise<void> {
  const result = await world.gql<Record<string, any>>(
    world.admin,
    `query($name: String!) {
       environment(name: $name) { currentPlan { id } activeDeployment { id } deployedPlan { id } deploymentSequence }
       deployments(environment: $name, first: 500) { id sequence status startedBy reconciledBy plan { id } }
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
  const events = await app.app.get(Database).read((m) =>
    select<{ type: string; deployment_sequence: number }>(
      m,
      `SELECT type, deployment_sequence FROM outbox_events
         WHERE environment = :environment
           AND type IN ('deployment.started', 'deployment.finished', 'deployment.reconciled')
         ORDER BY id`,
      { environment: model.environment },
    ),
  );
  expect(
    events.map((e) => `${e.type} ${model.environment}#${Number(e.deployment_sequence)}`),
  ).toEqual(model.events);
}

function command(
  describe: string,
  act: (model: DeploymentsModel) => Promise<{ expected: string; actual: string }>,
): Command {
  return {
    check: () => true,
    async run(model) {
      const { expected, actual } = await act(model);
      count(`${describe.split(' ')[1]} ${actual.split(' ')[0].replace(/\d+$/, '')}`);
      expect(`${describe}: ${actual}`).toBe(`${describe}: ${expected}`);
      await expectSameState(model);
    },
    toString: () => describe,
  };
}

/** The deployment a command aims at: the newest, an older one, or one that does not exist. */
function target(model: DeploymentsModel, pick: number): string {
  const all = model.deployments;
  if (pick === 0 || !all.length) return `${model.environment}#${all.length + 1}`;
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

/**
 * An agent publishes a plan: unbound, or (R33) made against the environment's deployment
 * sequence as it is now, or against one that is no longer (or not yet) the environment's.
 */
function publishing(against: 'unbound' | 'the current sequence' | 'another sequence'): Command {
  return command(`agent publishes a plan made against ${against}`, async (model) => {
    const basedOn =
      against === 'unbound'
        ? null
        : against === 'the current sequence'
          ? model.deploymentSequence
          : model.deploymentSequence > 0
            ? model.deploymentSequence - 1
            : 1;
    const generation = await world.acquire(tokens.agent, model.environment);
    const plan = await world.gql(
      tokens.agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
      {
        input: {
          environment: model.environment,
          generation,
          content: 'plan',
          idempotencyKey: `${model.environment}-publish-${++keys}`,
          basedOnDeploymentSequence: basedOn,
        },
      },
    );
    await world.release(tokens.agent, model.environment, generation);
    return { expected: model.publish(basedOn), actual: answerOf(plan, 'submitPlan') };
  });
}

const publish = publishing('unbound');

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
            ? (model.plans.at(-2) ?? `${model.environment}@98.1`)
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

const finish = fc.record({ d: deployer, pick: aim, outcome }).map(({ d, pick, outcome }) =>
  command(`${d} finishes deployment -${pick} ${outcome}`, async (model) => {
    const id = target(model, pick);
    return {
      expected: model.finish(d, id, outcome),
      actual: answerOf(await deployments.finish(tokens[d], id, outcome), 'finishDeployment'),
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
  fc.constant(publish),
  fc.constant(publishing('the current sequence')),
  fc.constant(publishing('another sequence')),
  start,
  start,
  start,
  start,
  heartbeat,
  heartbeat,
  finish,
  finish,
  reconcile,
  reconcile,
  time,
  time,
  pausedReport,
];

// proves: R18, R19, R20, R21, R22
test(`deployments behave as the reference model (${RUNS} runs)`, async () => {
  await fc.assert(
    fc.asyncProperty(fc.commands(weighted, { maxCommands: 20, size: 'large' }), async (cmds) => {
      const name = `dm${++runs}`;
      await world.createEnvironment(name, 'MONOTONIC', false);
      const model = new DeploymentsModel(name, await app.clock.now());
      // Every run begins with a published plan, so that most starts have something to deploy.
      await publish.run(model, world);
      await fc.asyncModelRun(() => ({ model, real: world }), cmds);
    }),
    { numRuns: RUNS, seed: MODEL_SEED },
  );
  if (process.env.FC_STATS) console.log(Object.fromEntries([...outcomes].sort()));
  // Enough runs reach every outcome of every decision, and every status; fewer (FC_RUNS) may not.
  if (RUNS >= 100)
    for (const reached of [
      'starts OK',
      'starts PRECONDITION_FAILED',
      'starts PRECONDITION_FAILED:seq',
      'publishes OK',
      'publishes PRECONDITION_FAILED:seq',
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
    ])
      expect({ [reached]: (outcomes.get(reached) ?? 0) > 0 }).toEqual({ [reached]: true });
  for (const [kind, n] of outcomes) if (kind.endsWith('INTERNAL')) throw new Error(`${kind}: ${n}`);
}, 1_200_000);
