/**
 * The console's plan view shows the checks of DESIGN R50: each check's latest result with its
 * summary and a link to its details (http(s) only; anything else is shown without a link),
 * and the required checks a PROPOSED plan still waits for.
 */
import { consoleSuite } from './support/console.js';
import { ok, World } from './support/world.js';

const suite = consoleSuite();
let world: World;
const tokens: Record<string, string> = {};

async function issue(name: string, role: string): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    world.admin,
    'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
    { name, role },
  );
  return ok(result).issueToken.token;
}

beforeAll(async () => {
  ({ world } = suite);
  tokens.agent = await issue('agent', 'AGENT');
  tokens.reviewer = await issue('reviewer', 'REVIEWER');
  tokens.checker = await issue('ci', 'CHECKER');
});

function report(planId: string, name: string, status: string, extra: Record<string, unknown>) {
  return world.gql(
    tokens.checker,
    'mutation($input: ReportCheckInput!) { reportCheck(input: $input) { id } }',
    { input: { planId, name, status, ...extra } },
  );
}

// proves: R50
test('the plan view lists the checks with their links and the ones still waited for', async () => {
  await world.createEnvironment('console-checks', 'MONOTONIC', true);
  ok(
    await world.gql(
      world.admin,
      'mutation { updateEnvironmentPolicy(input: { environment: "console-checks", requiredChecks: ["scan", "cost", "unit"] }) { name } }',
    ),
  );
  const generation = await world.acquire(tokens.agent, 'console-checks', 600);
  const plan = await world.submitOk(tokens.agent, 'console-checks', generation, 'scale up');
  ok(
    await report(plan.id, 'scan', 'SUCCESS', {
      summary: '0 findings <img src=x onerror=alert(1)>',
      detailsUrl: 'https://ci.example/runs/42',
    }),
  );
  ok(await report(plan.id, 'cost', 'FAILURE', { summary: '+$120/month' }));

  const page = await suite.signIn(tokens.reviewer);
  await page.goto(`${suite.app.url}/?plan=${encodeURIComponent(plan.id)}`);
  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  const checks = page.locator('#plan-checks');
  await checks.waitFor();
  const text = await checks.textContent();
  expect(text).toContain('SUCCESS scan: 0 findings <img src=x onerror=alert(1)>');
  expect(text).toContain('FAILURE cost: +$120/month');
  expect(text).toContain('waiting for cost, unit');
  const link = checks.locator('a');
  expect(await link.count()).toBe(1);
  expect(await link.getAttribute('href')).toBe('https://ci.example/runs/42');
  expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
  expect(await checks.locator('img').count()).toBe(0);
});
