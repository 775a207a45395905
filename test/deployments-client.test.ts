/** Deployers through the client (`withDeployment`) and the `planfence deploy` command line. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PlanfenceClient } from '../src/client/client.js';
import { DeploymentNotActiveError, Deployments as Client } from '../src/client/deployments.js';
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { ok, World } from './support/world.js';

const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

let app: TestApp;
let world: World;
let d: Deployments;
const tokens: Record<string, string> = {};
const clientOf = (token: string) => new Client(new PlanfenceClient({ url: app.url, token }));

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  d = new Deployments(world);
  tokens.agent = await world.issue('agent', 'AGENT');
  tokens.reviewer = await world.issue('reviewer', 'REVIEWER');
  tokens.d1 = await world.issue('d1', 'DEPLOYER');
  tokens.d2 = await world.issue('d2', 'DEPLOYER');
});
afterAll(() => app.close());

// proves: R18, R19
test('withDeployment hands the work the current plan and its sequence, and finishes SUCCEEDED with its result', async () => {
  const [plan] = await d.environmentWithPlans('client-ok', tokens.agent, 1);
  const seen: { plan: string; sequence: number }[] = [];
  const { result, deployment } = await clientOf(tokens.d1).withDeployment(
    'client-ok',
    async (context) => {
      seen.push({ plan: context.plan.id, sequence: context.sequence });
      expect((await d.get(context.deployment.id))?.status).toBe('IN_PROGRESS');
      return 'applied 3 resources';
    },
    { heartbeatSeconds: 30, describe: (r) => String(r) },
  );
  expect(seen).toEqual([{ plan, sequence: 1 }]);
  expect(result).toBe('applied 3 resources');
  expect(deployment).toMatchObject({ status: 'SUCCEEDED', detail: 'applied 3 resources' });
  expect((await d.environment('client-ok')).deployedPlan).toEqual({ id: plan });
});

// proves: R56
test('withDeployment sends the state its `state` option reads with the finish, FAILED included; the environment shows the latest', async () => {
  await d.environmentWithPlans('client-state', tokens.agent, 2);
  const client = clientOf(tokens.d1);
  const terraformState = async () =>
    ok(
      await world.gql<{ environment: { terraformState: unknown } }>(
        tokens.d1,
        '{ environment(name: "client-state") { terraformState { lineage serial } } }',
      ),
    ).environment.terraformState;
  const { deployment } = await client.withDeployment('client-state', () => Promise.resolve(), {
    state: () => Promise.resolve({ lineage: 'lineage-1', serial: 4 }),
  });
  expect(deployment.status).toBe('SUCCEEDED');
  expect(await terraformState()).toEqual({ lineage: 'lineage-1', serial: 4 });
  // A partial apply moves the serial too: the FAILED finish carries it.
  await d.publish('client-state', tokens.agent);
  await expect(
    client.withDeployment('client-state', () => Promise.reject(new Error('partial apply')), {
      state: () => Promise.resolve({ lineage: 'lineage-1', serial: 6 }),
    }),
  ).rejects.toThrow('partial apply');
  expect(await terraformState()).toEqual({ lineage: 'lineage-1', serial: 6 });
  // A state that cannot be read is not sent; the outcome is reported all the same.
  await d.publish('client-state', tokens.agent);
  const unread = await client.withDeployment('client-state', () => Promise.resolve(), {
    state: () => Promise.reject(new Error('no backend')),
  });
  expect(unread.deployment.status).toBe('SUCCEEDED');
  expect(await terraformState()).toEqual({ lineage: 'lineage-1', serial: 6 });
});

test('a failing work finishes FAILED with its message, and the error reaches the caller', async () => {
  await d.environmentWithPlans('client-failed', tokens.agent, 1);
  await expect(
    clientOf(tokens.d1).withDeployment('client-failed', () =>
      Promise.reject(new Error('terraform apply exited 1')),
    ),
  ).rejects.toThrow('terraform apply exited 1');
  expect((await d.list('client-failed'))[0]).toMatchObject({
    status: 'FAILED',
    detail: 'terraform apply exited 1',
  });
});

// proves: R19, R20
test('a refused heartbeat aborts the work; its late SUCCEEDED report after a reconcile is refused', async () => {
  await d.environmentWithPlans('client-late', tokens.agent, 1);
  const outcome = clientOf(tokens.d1).withDeployment(
    'client-late',
    async ({ deployment, signal }) => {
      // The deployer is "paused": the heartbeat lapses and a reviewer reconciles meanwhile.
      app.clock.advance(6_000);
      ok(await d.reconcile(tokens.reviewer, deployment.id, 'FAILED', 'runner lost'));
      // The refusal may have come while the reconcile was answered: an abort event fires once.
      if (!signal.aborted) {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      }
      expect(signal.reason).toBeInstanceOf(DeploymentNotActiveError);
      return 'applied anyway';
    },
    { heartbeatSeconds: 5, heartbeatEveryMs: 20 },
  );
  await expect(outcome).rejects.toBeInstanceOf(DeploymentNotActiveError);
  expect((await d.list('client-late'))[0]).toMatchObject({
    status: 'FAILED',
    reconciledBy: 'reviewer',
  });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function planfence(token: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token };
    execFile(process.execPath, [BIN, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

test('planfence deploy: start, refused second start (exit 7), finish, reconcile, list', async () => {
  const [plan] = await d.environmentWithPlans('cli', tokens.agent, 1);
  const started = await planfence(
    tokens.d1,
    'deploy',
    'start',
    'cli',
    '--heartbeat',
    '5',
    '--json',
  );
  expect(started.code).toBe(0);
  expect(JSON.parse(started.stdout)).toMatchObject({
    id: 'cli#1',
    sequence: 1,
    plan: { id: plan },
  });

  const second = await planfence(tokens.d2, 'deploy', 'start', 'cli', '--plan', plan);
  expect(second.code).toBe(7);
  expect(second.stderr).toContain('DEPLOYMENT_ACTIVE');
  expect(second.stderr).toContain('deploymentId=cli#1');

  expect((await planfence(tokens.d1, 'deploy', 'heartbeat', 'cli#1')).code).toBe(0);
  const finished = await planfence(
    tokens.d1,
    'deploy',
    'finish',
    'cli#1',
    '--failed',
    '--detail',
    'boom',
  );
  expect(finished).toMatchObject({ code: 0 });
  expect(finished.stdout).toContain('cli#1 FAILED');
  const late = await planfence(tokens.d1, 'deploy', 'finish', 'cli#1', '--succeeded');
  expect(late.code).toBe(7);
  expect(late.stderr).toContain('DEPLOYMENT_NOT_ACTIVE');

  expect(
    JSON.parse((await planfence(tokens.d2, 'deploy', 'start', 'cli', '--json')).stdout),
  ).toMatchObject({
    id: 'cli#2',
  });
  app.clock.advance(61_000);
  const reconciled = await planfence(
    tokens.reviewer,
    'deploy',
    'reconcile',
    'cli#2',
    '--outcome',
    'succeeded',
    '--note',
    'checked',
  );
  expect(reconciled.code).toBe(0);
  expect(reconciled.stdout).toContain('reconciled by reviewer: checked');

  const list = await planfence(tokens.reviewer, 'deploy', 'list', 'cli');
  expect(list.code).toBe(0);
  expect(list.stdout.split('\n')[1]).toMatch(/^cli#2\s+2\s+\S+\s+SUCCEEDED/);
  expect((await planfence(tokens.reviewer, 'deploy', 'finish', 'cli#2')).code).toBe(2);
  expect((await planfence(tokens.agent, 'deploy', 'start', 'cli')).code).toBe(3);
});
