/**
 * DESIGN R53 with the real terraform (built-in providers only, offline): `planfence drift
 * check ENV --terraform --chdir DIR` runs `terraform plan -refresh-only -detailed-exitcode`.
 * The configuration reads another configuration's local state through
 * `terraform_remote_state`; that state is changed outside planfence, so the refresh-only plan
 * finds the output drifted (exit 2) and the drift is reported: the deployment sequence moves
 * and a plan made before it is refused. With nothing changed (exit 0) nothing is reported.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { PLANFENCE_BIN, run, withTerraform } from './support/commands.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};
const dir = scratchDir();
const upstream = join(dir.path, 'network');
const service = join(dir.path, 'service');

async function issue(name: string, role: string): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    world.admin,
    'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
    { name, role },
  );
  return ok(result).issueToken.token;
}

async function terraform(chdir: string, ...args: string[]) {
  const result = await run('terraform', [`-chdir=${chdir}`, ...args, '-input=false', '-no-color']);
  expect({ args, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
}

function driftCheck() {
  return run(
    process.execPath,
    [PLANFENCE_BIN, 'drift', 'check', 'drifty', '--terraform', '--chdir', service, '--json'],
    { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: tokens.checker },
  );
}

async function deploymentSequence(): Promise<number> {
  const result = await world.gql<{ environment: { deploymentSequence: number } }>(
    world.admin,
    '{ environment(name: "drifty") { deploymentSequence } }',
  );
  return ok(result).environment.deploymentSequence;
}

withTerraform('drift check with terraform', () => {
  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    tokens.agent = await issue('agent', 'AGENT');
    tokens.reviewer = await issue('reviewer', 'REVIEWER');
    tokens.checker = await issue('drift-watch', 'CHECKER');
    mkdirSync(upstream);
    mkdirSync(service);
    writeFileSync(
      join(upstream, 'main.tf'),
      `variable "cidr" { type = string }
resource "terraform_data" "subnet" { input = var.cidr }
output "cidr" { value = terraform_data.subnet.output }
`,
    );
    writeFileSync(
      join(service, 'main.tf'),
      `data "terraform_remote_state" "network" {
  backend = "local"
  config  = { path = "../network/terraform.tfstate" }
}
resource "terraform_data" "app" { input = "app" }
output "subnet" { value = data.terraform_remote_state.network.outputs.cidr }
`,
    );
    await terraform(upstream, 'init');
    await terraform(upstream, 'apply', '-auto-approve', '-var', 'cidr=10.0.1.0/24');
    await terraform(service, 'init');
    await terraform(service, 'apply', '-auto-approve');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    dir.cleanup();
  });

  // proves: R53
  test('no drift: nothing reported; a change outside planfence: drift reported, a plan made before it refused', async () => {
    await world.createEnvironment('drifty', 'MONOTONIC', true);
    const quiet = await driftCheck();
    expect(quiet).toMatchObject({ code: 0 });
    expect(JSON.parse(quiet.stdout)).toEqual({ drift: false });
    expect(await deploymentSequence()).toBe(0);

    // A plan made against sequence 0, waiting for review.
    const generation = await world.acquire(tokens.agent, 'drifty', 600);
    const before = ok(
      await world.gql<{ submitPlan: { id: string; status: string } }>(
        tokens.agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status } }',
        {
          input: {
            environment: 'drifty',
            generation,
            content: 'plan made before the drift',
            basedOnDeploymentSequence: 0,
            idempotencyKey: freshKey(),
          },
        },
      ),
    ).submitPlan;
    expect(before.status).toBe('PROPOSED');

    // Someone changes the network outside planfence.
    await terraform(upstream, 'apply', '-auto-approve', '-var', 'cidr=10.0.9.0/24');
    const found = await driftCheck();
    expect(found).toMatchObject({ code: 0 });
    const env = JSON.parse(found.stdout.slice(0, found.stdout.lastIndexOf('}') + 1)) as {
      deploymentSequence: number;
      driftReportedAt: string | null;
    };
    expect(env.deploymentSequence).toBe(1);
    expect(env.driftReportedAt).not.toBeNull();

    const refused = await world.approve(tokens.reviewer, before.id);
    expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
    expect(refused.errors![0].extensions).toMatchObject({ status: 'OBSOLETE' });
    const audit = await world.auditEvents('drifty');
    const report = audit.find((e) => e.action === 'REPORT_DRIFT') as { detail?: string };
    expect(report.detail).toContain('10.0.9.0/24');
  }, 120_000);
});
