/**
 * Terraform end to end with the real `terraform` (skipped where it is not on PATH): a working
 * directory with only built-in resources (terraform_data) and the local backend, planned,
 * submitted with the `planfence` binary (dist/src/cli/main.js, built by `npm test`), approved
 * and applied with `planfence deploy apply --terraform`. A plan built before that apply is
 * refused by R33 before terraform runs; without R33, terraform's own "Saved plan is stale"
 * ends the deployment FAILED.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PlanfenceClient } from '../src/client/client.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { World } from './support/world.js';

const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const hasTerraform = spawnSync('terraform', ['version'], { stdio: 'ignore' }).status === 0;
const withTerraform = hasTerraform ? describe : describe.skip;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: { ...process.env, TF_IN_AUTOMATION: '1', ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

withTerraform('planfence and terraform', () => {
  let app: TestApp;
  let world: World;
  let d: Deployments;
  const dir = scratchDir();
  const tokens: Record<string, string> = {};

  const planfence = (token: string, ...args: string[]) =>
    run(process.execPath, [BIN, ...args], { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token });
  const tf = (...args: string[]) => run('terraform', [`-chdir=${dir.path}`, ...args]);
  const plan = async (file: string, rev: string) =>
    expect(
      await tf('plan', '-input=false', '-no-color', `-var=rev=${rev}`, `-out=${file}`),
    ).toMatchObject({
      code: 0,
    });
  /** What the local state says terraform_data.app holds. */
  const applied = (): string | null => {
    const state = JSON.parse(readFileSync(join(dir.path, 'terraform.tfstate'), 'utf8')) as {
      resources: { name: string; instances: { attributes: { input: { value: string } } }[] }[];
    };
    // terraform_data keeps its input as a dynamic value: {type, value}.
    return (
      state.resources.find((r) => r.name === 'app')?.instances[0].attributes.input.value ?? null
    );
  };
  const approve = async (planId: string) =>
    planfence(tokens.reviewer, 'plan', 'approve', planId, '--json');

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    d = new Deployments(world);
    tokens.agent = await world.issue('agent', 'AGENT');
    tokens.reviewer = await world.issue('reviewer', 'REVIEWER');
    tokens.deployer = await world.issue('deployer', 'DEPLOYER');
    await world.createEnvironment('infra', 'MONOTONIC', true);
    writeFileSync(
      join(dir.path, 'main.tf'),
      `variable "rev" { type = string }
resource "terraform_data" "app" { input = "app-\${var.rev}" }
`,
    );
    expect(await tf('init', '-input=false', '-no-color')).toMatchObject({ code: 0 });
  });
  afterAll(async () => {
    await app.close();
    dir.cleanup();
  });

  test('plan → submit → approve → deploy apply changes the state; a plan built before that apply is refused by R33; without R33 terraform refuses the stale plan file', async () => {
    // The state the plans are made against: deployment sequence 0, as the agent reads it.
    const shown = await planfence(tokens.agent, 'env', 'show', 'infra', '--json');
    const sequence = String(JSON.parse(shown.stdout).deploymentSequence);
    expect(sequence).toBe('0');
    // Two plans of the same state: the first will be applied, the second is then stale.
    await plan('one.tfplan', '1');
    await plan('two.tfplan', '2');

    const submitted = await planfence(
      tokens.agent,
      'plan',
      'submit',
      'infra',
      '--terraform',
      'one.tfplan',
      '--chdir',
      dir.path,
      '--deployment-sequence',
      sequence,
      '--source-revision',
      'c0ffee',
      '--json',
    );
    expect(submitted).toMatchObject({ code: 0, stderr: '' });
    const one = JSON.parse(submitted.stdout);
    expect(one).toMatchObject({
      status: 'PROPOSED',
      contentType: 'TERRAFORM_PLAN_JSON',
      basedOnDeploymentSequence: 0,
      sourceRevision: 'c0ffee',
      summary: { add: 1, change: 0, destroy: 0, replace: 0 },
    });
    expect(one.summary.resourceChanges).toMatchObject([
      { address: 'terraform_data.app', actions: ['create'] },
    ]);
    expect(one.artifactHash).toMatch(/^[0-9a-f]{64}$/);
    expect((await approve(one.id)).code).toBe(0);

    const apply = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
      '--json',
    );
    expect(apply.code).toBe(0);
    expect(JSON.parse(apply.stdout)).toMatchObject({
      id: 'infra#1',
      status: 'SUCCEEDED',
      plan: { id: one.id },
    });
    expect(applied()).toBe('app-1');

    // The second plan, built before that apply, is submitted afterwards under a newer
    // generation: R33 refuses its publication, and the already applied plan is not applied again.
    const late = await planfence(
      tokens.agent,
      'plan',
      'submit',
      'infra',
      '--terraform',
      'two.tfplan',
      '--chdir',
      dir.path,
      '--deployment-sequence',
      sequence,
      '--json',
    );
    expect(late.code).toBe(0);
    const two = JSON.parse(late.stdout);
    expect(two.generation).toBeGreaterThan(one.generation);
    const refused = await approve(two.id);
    expect(refused.code).toBe(7);
    expect(refused.stderr).toContain('PRECONDITION_FAILED');
    expect(refused.stderr).toContain('deploymentSequence=1');
    const again = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
    );
    expect(again.code).toBe(7);
    expect(again.stderr).toContain('deploymentSequence=1');
    expect(await d.list('infra')).toHaveLength(1);
    expect(applied()).toBe('app-1');

    // Without R33 the service publishes both plans; terraform itself refuses the stale file.
    await plan('three.tfplan', '3');
    await plan('four.tfplan', '4');
    const client = new PlanfenceClient({ url: app.url, token: tokens.agent });
    const unbound = async (file: string) => {
      const lease = await client.acquireLease('infra');
      const submittedPlan = await client.submitTerraformPlan({
        environment: 'infra',
        generation: lease.generation,
        planJson: (await tf('show', '-json', file)).stdout,
        planFile: readFileSync(join(dir.path, file)),
      });
      await client.releaseLease('infra', lease.generation);
      expect(submittedPlan.summary).toMatchObject({ change: 1 });
      expect((await approve(submittedPlan.id)).code).toBe(0);
      return submittedPlan;
    };
    await unbound('three.tfplan');
    const three = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
      '--json',
    );
    expect(three.code).toBe(0);
    expect(applied()).toBe('app-3');

    const four = await unbound('four.tfplan');
    const stale = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
    );
    expect(stale.code).toBe(9);
    expect(stale.stderr).toContain('Saved plan is stale');
    const [failed] = await d.list('infra', 1);
    expect(failed).toMatchObject({ id: 'infra#3', status: 'FAILED', plan: { id: four.id } });
    expect(failed.detail).toContain('Saved plan is stale');
    expect(applied()).toBe('app-3');
  });

  test('deploy apply refuses a current plan that is not a Terraform plan with its plan file, before any deployment', async () => {
    await world.createEnvironment('text', 'MONOTONIC', false);
    await d.publish('text', tokens.agent);
    const refused = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'text',
      '--terraform',
      '--chdir',
      dir.path,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('not a Terraform plan with its plan file');
    expect(await d.list('text')).toEqual([]);
  });
});
