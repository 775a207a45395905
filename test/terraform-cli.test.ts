/**
 * Terraform end to end with the real `terraform` (skipped where it is not on PATH): a working
 * directory with only built-in resources (terraform_data) and the local backend, planned,
 * submitted with the `planfence` binary (dist/src/cli/main.js, built by `npm test`), approved
 * and applied with `planfence deploy apply --terraform`. The applier applies only the reviewed
 * plan (R55: a plan file swapped under a reviewed content is refused, nothing destroyed) and
 * reports the state it left (R56); a plan made from an older state is refused (R56, R57).
 */
import { jest } from '@jest/globals';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PlanfenceClient } from '../src/client/client.js';
import { PLANFENCE_BIN as BIN, run, withTerraform } from './support/commands.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { ok, World } from './support/world.js';

/** Each test runs the command line (or terraform) as processes, one after another: a loaded machine takes seconds each. */
jest.setTimeout(180_000);

/** How often `needle` occurs in `text`. */
const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

withTerraform('planfence and terraform', () => {
  let app: TestApp;
  let world: World;
  let d: Deployments;
  const dir = scratchDir();
  const tokens: Record<string, string> = {};

  const planfence = (token: string, ...args: string[]) =>
    run(process.execPath, [BIN, ...args], { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token });
  const tf = (...args: string[]) => run('terraform', [`-chdir=${dir.path}`, ...args]);
  const plan = async (file: string, rev: string, ...extra: string[]) =>
    expect(
      await tf('plan', '-input=false', '-no-color', `-var=rev=${rev}`, `-out=${file}`, ...extra),
    ).toMatchObject({ code: 0 });
  const stateFile = () => readFileSync(join(dir.path, 'terraform.tfstate'), 'utf8');
  /** What the local state says terraform_data.app holds (null: no such resource). */
  const applied = (): string | null => {
    const state = JSON.parse(stateFile()) as {
      resources: { name: string; instances: { attributes: { input: { value: string } } }[] }[];
    };
    // terraform_data keeps its input as a dynamic value: {type, value}.
    return (
      state.resources.find((r) => r.name === 'app')?.instances[0].attributes.input.value ?? null
    );
  };
  const serial = () => (JSON.parse(stateFile()) as { serial: number; lineage: string }).serial;
  const lineage = () => (JSON.parse(stateFile()) as { lineage: string }).lineage;
  const approve = async (planId: string) =>
    planfence(tokens.reviewer, 'plan', 'approve', planId, '--json');
  const submit = async (file: string, ...extra: string[]) =>
    planfence(
      tokens.agent,
      'plan',
      'submit',
      'infra',
      '--terraform',
      file,
      '--chdir',
      dir.path,
      '--json',
      ...extra,
    );
  const apply = (...extra: string[]) =>
    planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
      ...extra,
    );
  const reportedState = async () =>
    ok(
      await world.gql<{
        environment: { terraformState: { lineage: string; serial: number } | null };
      }>(world.admin, '{ environment(name: "infra") { terraformState { lineage serial } } }'),
    ).environment.terraformState;

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

  // proves: R56
  test('plan → submit (no deployment sequence) → approve → deploy apply: SUCCEEDED, terraform output printed once, the state after it reported', async () => {
    await plan('one.tfplan', '1');
    const submitted = await submit('one.tfplan', '--source-revision', 'c0ffee');
    expect(submitted).toMatchObject({ code: 0, stderr: '' });
    const one = JSON.parse(submitted.stdout);
    expect(one).toMatchObject({
      status: 'PROPOSED',
      contentType: 'TERRAFORM_PLAN_JSON',
      basedOnDeploymentSequence: null,
      sourceRevision: 'c0ffee',
      summary: { add: 1, change: 0, destroy: 0, replace: 0 },
    });
    expect(one.summary.resourceChanges).toMatchObject([
      { address: 'terraform_data.app', actions: ['create'] },
    ]);
    expect(one.artifactHash).toMatch(/^[0-9a-f]{64}$/);
    expect((await approve(one.id)).code).toBe(0);

    const human = await apply();
    expect(human.code).toBe(0);
    expect(applied()).toBe('app-1');
    // terraform's output once, on stderr as it came; stdout has one line without it.
    expect(occurrences(human.stderr, 'Apply complete!')).toBe(1);
    expect(human.stdout).not.toContain('Apply complete!');
    expect(human.stdout.trim()).toBe(
      `infra#1 SUCCEEDED (sequence 1, plan ${one.id}), state serial ${serial()}`,
    );
    const [deployment] = await d.list('infra', 1);
    expect(deployment).toMatchObject({ id: 'infra#1', status: 'SUCCEEDED', plan: { id: one.id } });
    expect(deployment.detail).toContain('Apply complete!');
    expect(await reportedState()).toEqual({ lineage: lineage(), serial: serial() });

    // plan show --json: every field, the summary included, for `jq .summary`.
    const shown = JSON.parse(
      (await planfence(tokens.reviewer, 'plan', 'show', one.id, '--json')).stdout,
    );
    expect(shown.summary).toMatchObject({
      add: 1,
      resourceChanges: [{ address: 'terraform_data.app' }],
    });
    expect(shown).toMatchObject({
      id: one.id,
      reviewUrl: `${app.url}/?plan=${encodeURIComponent(one.id)}`,
    });
    expect(shown).not.toHaveProperty('artifact');
    expect(shown).toHaveProperty('priorState');
    // The plan file only on request, and only to DEPLOYER and ADMIN (R54).
    const withFile = await planfence(
      tokens.deployer,
      'plan',
      'show',
      one.id,
      '--json',
      '--artifact',
    );
    expect(JSON.parse(withFile.stdout).artifact).toBe(
      readFileSync(join(dir.path, 'one.tfplan')).toString('base64'),
    );
    const forbidden = await planfence(tokens.reviewer, 'plan', 'show', one.id, '--artifact');
    expect(forbidden.code).toBe(3);
    expect(forbidden.stderr).toContain('FORBIDDEN');
  });

  // proves: R55
  test('the content of one plan with the plan file of a -destroy plan of the same configuration: deploy apply refuses, nothing is destroyed, the deployment is FAILED with the reason', async () => {
    await plan('two.tfplan', '2');
    await plan('destroy.tfplan', '2', '-destroy');
    const before = stateFile();
    const client = new PlanfenceClient({ url: app.url, token: tokens.agent });
    const lease = await client.acquireLease('infra');
    const swapped = await client.submitTerraformPlan({
      environment: 'infra',
      generation: lease.generation,
      planJson: (await tf('show', '-json', 'two.tfplan')).stdout,
      planFile: readFileSync(join(dir.path, 'destroy.tfplan')),
    });
    await client.releaseLease('infra', lease.generation);
    // What the reviewer sees is the update of two.tfplan.
    expect(swapped.summary).toMatchObject({ change: 1, destroy: 0 });
    expect((await approve(swapped.id)).code).toBe(0);

    const refused = await apply('--json');
    expect(refused.code).toBe(10);
    expect(refused.stderr).toContain('the plan file is not the reviewed plan: ');
    expect(refused.stderr).toContain('terraform_data.app');
    expect(refused.stderr).toContain('terraform apply did not run');
    expect(refused.stderr).not.toContain('Apply complete!');
    expect(JSON.parse(refused.stdout)).toMatchObject({
      status: 'FAILED',
      plan: { id: swapped.id },
    });
    // Nothing destroyed, the state not even rewritten.
    expect(stateFile()).toBe(before);
    expect(applied()).toBe('app-1');
    const [failed] = await d.list('infra', 1);
    expect(failed).toMatchObject({ id: 'infra#2', status: 'FAILED', plan: { id: swapped.id } });
    expect(failed.detail).toMatch(/^the plan file is not the reviewed plan: .*terraform_data\.app/);
  });

  // proves: R55
  test('a reviewed plan with the plan file of the same changes and a local-exec provisioner besides: deploy apply refuses, the command never runs', async () => {
    await world.createEnvironment('hooks', 'MONOTONIC', true);
    const marker = join(dir.path, 'hook-ran');
    const made: Record<string, string> = {};
    const provisioner = `\n  provisioner "local-exec" { command = "echo ran > ${marker}" }`;
    for (const [name, extra] of [
      ['benign', ''],
      ['evil', provisioner],
    ]) {
      const at = join(dir.path, name);
      mkdirSync(at);
      writeFileSync(
        join(at, 'main.tf'),
        `resource "terraform_data" "hook" {\n  input = "h-1"${extra}\n}\n`,
      );
      const tfAt = (...args: string[]) => run('terraform', [`-chdir=${at}`, ...args]);
      expect(await tfAt('init', '-input=false', '-no-color')).toMatchObject({ code: 0 });
      expect(await tfAt('plan', '-input=false', '-no-color', '-out=p.tfplan')).toMatchObject({
        code: 0,
      });
      made[name] = at;
    }
    const client = new PlanfenceClient({ url: app.url, token: tokens.agent });
    const lease = await client.acquireLease('hooks');
    const swapped = await client.submitTerraformPlan({
      environment: 'hooks',
      generation: lease.generation,
      planJson: (await run('terraform', [`-chdir=${made.benign}`, 'show', '-json', 'p.tfplan']))
        .stdout,
      planFile: readFileSync(join(made.evil, 'p.tfplan')),
    });
    await client.releaseLease('hooks', lease.generation);
    // What the reviewer sees (and the policies read) is the benign plan: no provisioner.
    expect(swapped.summary).toMatchObject({ add: 1, provisioners: [] });
    expect((await approve(swapped.id)).code).toBe(0);

    const refused = await planfence(
      tokens.deployer,
      'deploy',
      'apply',
      'hooks',
      '--terraform',
      '--chdir',
      made.benign,
      '--json',
    );
    expect(refused.code).toBe(10);
    expect(refused.stderr).toContain(
      'the plan file is not the reviewed plan: configuration: .root_module.resources[0].provisioners none reviewed',
    );
    expect(refused.stderr).toContain('terraform apply did not run');
    expect(existsSync(marker)).toBe(false);
  });

  // proves: R56, R57
  test('a plan made from the state before an apply is refused STATE_SERIAL, with no deployment sequence anywhere; terraform never runs it', async () => {
    await plan('three.tfplan', '3');
    await plan('four.tfplan', '4');
    const three = JSON.parse((await submit('three.tfplan')).stdout);
    expect(three.priorState).toEqual({ lineage: lineage(), serial: serial() });
    expect((await approve(three.id)).code).toBe(0);
    expect((await apply()).code).toBe(0);
    expect(applied()).toBe('app-3');
    const after = stateFile();

    // four.tfplan was computed from the state three's apply replaced.
    const late = await submit('four.tfplan');
    expect(late.code).toBe(7);
    expect(late.stderr).toContain('PRECONDITION_FAILED');
    expect(late.stderr).toContain('reason=STATE_SERIAL');
    // Applying three again is refused at start too: its state is no longer the latest.
    const again = await apply();
    expect(again.code).toBe(7);
    expect(again.stderr).toContain('reason=STATE_SERIAL');
    expect(stateFile()).toBe(after);
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
