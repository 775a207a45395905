/**
 * The command line of DESIGN §22 against the real service: `env set` (required checks,
 * promotion, deploy window), `check report` by a CHECKER (the SUCCESS that completes what
 * publication needs publishes), `drift report`, and the refusals' exit codes.
 */
import { PLANFENCE_BIN, run as runFile } from './support/commands.js';
import { startApp, type TestApp } from './support/app.js';
import { ok, World } from './support/world.js';

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};

function planfence(token: string, ...args: string[]) {
  return runFile(process.execPath, [PLANFENCE_BIN, ...args], {
    PLANFENCE_URL: app.url,
    PLANFENCE_TOKEN: token,
  });
}

async function issue(name: string, role: string): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    world.admin,
    'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
    { name, role },
  );
  return ok(result).issueToken.token;
}

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  tokens.agent = await issue('agent', 'AGENT');
  tokens.reviewer = await issue('reviewer', 'REVIEWER');
  tokens.checker = await issue('ci-scan', 'CHECKER');
});
afterAll(() => app.close());

// proves: R50
test('env set, check report and drift report through the command line', async () => {
  await world.createEnvironment('cli-staging', 'MONOTONIC', false);
  await world.createEnvironment('cli-prod', 'MONOTONIC', true);
  const set = await planfence(
    world.admin,
    'env',
    'set',
    'cli-prod',
    '--required-checks',
    'scan,unit',
    '--promote-from',
    'cli-staging',
    '--soak',
    '1h',
    '--deploy-within',
    '30m',
    '--json',
  );
  expect(set.stderr).toBe('');
  expect(JSON.parse(set.stdout)).toMatchObject({
    requiredChecks: ['scan', 'unit'],
    promotion: { from: 'cli-staging', soakMinutes: 60 },
    deployWithinMinutes: 30,
  });
  const shown = await planfence(world.admin, 'env', 'set', 'cli-prod');
  expect(shown.stdout).toMatch(/required checks\s+scan, unit/);
  expect(shown.stdout).toMatch(/promotion\s+from cli-staging after 60 minutes/);
  const cleared = await planfence(
    world.admin,
    'env',
    'set',
    'cli-prod',
    '--promote-from',
    'none',
    '--deploy-within',
    'none',
    '--required-checks',
    'scan',
    '--json',
  );
  expect(JSON.parse(cleared.stdout)).toMatchObject({
    requiredChecks: ['scan'],
    promotion: null,
    deployWithinMinutes: null,
  });
  expect((await planfence(world.admin, 'env', 'set', 'cli-prod', '--soak', '5')).code).toBe(2);

  const generation = await world.acquire(tokens.agent, 'cli-prod', 600);
  const plan = await world.submitOk(tokens.agent, 'cli-prod', generation, 'plan');
  ok(await world.approve(tokens.reviewer, plan.id));
  const pending = await planfence(
    tokens.checker,
    'check',
    'report',
    plan.id,
    'scan',
    '--status',
    'failure',
    '--summary',
    '2 findings',
  );
  expect(pending).toMatchObject({ code: 0, stderr: '' });
  expect(pending.stdout).toContain(
    `scan FAILURE on ${plan.id}: the plan is PROPOSED; waiting for scan`,
  );
  const passed = await planfence(
    tokens.checker,
    'check',
    'report',
    plan.id,
    'scan',
    '--status',
    'SUCCESS',
    '--details-url',
    'https://ci.example/runs/7',
  );
  expect(passed.stdout).toContain('the plan is PUBLISHED');
  const late = await planfence(
    tokens.checker,
    'check',
    'report',
    plan.id,
    'scan',
    '--status',
    'SUCCESS',
  );
  expect(late.code).toBe(7);
  expect(late.stderr).toContain('INVALID_PLAN_STATE');
  const denied = await planfence(
    tokens.agent,
    'check',
    'report',
    plan.id,
    'scan',
    '--status',
    'SUCCESS',
  );
  expect(denied.code).toBe(3);
  expect((await planfence(tokens.checker, 'check', 'report', plan.id, 'scan')).code).toBe(2);

  const drifted = await planfence(
    tokens.checker,
    'drift',
    'report',
    'cli-prod',
    '--detail',
    'bucket policy edited by hand',
  );
  expect(drifted).toMatchObject({ code: 0, stderr: '' });
  expect(drifted.stdout).toContain('drift reported in cli-prod: deployment sequence 1');
  expect((await planfence(tokens.checker, 'drift', 'report', 'cli-prod')).code).toBe(2);
  expect((await planfence(tokens.agent, 'drift', 'report', 'cli-prod', '--detail', 'x')).code).toBe(
    3,
  );
});
