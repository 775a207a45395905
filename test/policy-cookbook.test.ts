/**
 * docs/policies.md's cookbook, run: every example policy file in it is saved as it is
 * written and decides the plans below as the page says; the command line applies and
 * tries one.
 */
import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { run as runProgram, withTerraform } from './support/commands.js';
import { ok, World } from './support/world.js';

/** Each test runs the command line (or terraform) as processes, one after another: a loaded machine takes seconds each. */
jest.setTimeout(180_000);

interface Policy {
  name: string;
  effect: string;
  expression: string;
  message: string;
  group?: string | null;
  count?: number;
}

const page = readFileSync(fileURLToPath(new URL('../docs/policies.md', import.meta.url)), 'utf8');
const cookbook = page.slice(page.indexOf('## Cookbook'));
const files = [...cookbook.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]);
const recipes = new Map<string, Policy[]>(
  files.map((text) => {
    const policies = parse(text) as Policy[];
    return [policies[0].name, policies];
  }),
);

let app: TestApp;
let world: World;
let securityReviewer: string;
let reviewer: string;
let agent: string;

beforeAll(async () => {
  app = await startApp({
    PLANFENCE_POLICY_BUDGET_MS: '1000',
    PLANFENCE_PLAN_POLICY_BUDGET_MS: '3000',
  });
  world = new World(app);
  const issue = async (name: string, role: string, groups: string[]) =>
    ok(
      await world.gql<{ issueToken: { token: string } }>(
        world.admin,
        'mutation($n: String!, $r: Role!, $g: [String!]) { issueToken(name: $n, role: $r, groups: $g) { token } }',
        { n: name, r: role, g: groups },
      ),
    ).issueToken.token;
  securityReviewer = await issue('sec', 'REVIEWER', ['security']);
  reviewer = await issue('rev', 'REVIEWER', []);
  agent = await issue('agent', 'AGENT', []);
  await world.createEnvironment('prod', 'MONOTONIC');
  await world.createEnvironment('staging', 'MONOTONIC');
});
afterAll(() => app.close());

/** A `terraform show -json` document with these resource changes. */
function terraform(...changes: [type: string, actions: string[]][]): string {
  return JSON.stringify({
    format_version: '1.2',
    terraform_version: '1.9.5',
    resource_changes: changes.map(([type, actions], i) => ({
      address: `${type}.r${i}`,
      mode: 'managed',
      type,
      name: `r${i}`,
      change: { actions, before: null, after: {} },
    })),
  });
}

async function decides(
  recipe: string,
  plan: { environment?: string; content: string; type?: string; by?: string },
): Promise<boolean> {
  const policies = recipes.get(recipe)!;
  const result = ok(
    await world.gql<{ dryRunPlanPolicies: { matched: boolean; error: string | null }[] }>(
      plan.by ?? reviewer,
      `query($env: String!, $p: [PlanPolicyInput!], $c: String!, $t: PlanContentType!) {
         dryRunPlanPolicies(environment: $env, planPolicies: $p, content: $c, contentType: $t) { matched error } }`,
      {
        env: plan.environment ?? 'prod',
        p: policies,
        c: plan.content,
        t: plan.type ?? 'TERRAFORM_PLAN_JSON',
      },
    ),
  ).dryRunPlanPolicies;
  expect(result.map((r) => r.error)).toEqual(policies.map(() => null));
  return result[0].matched;
}

const destroyBucket = terraform(['aws_s3_bucket', ['delete']]);
const createBucket = terraform(['aws_s3_bucket', ['create']]);

test('every example parses, type-checks and is saved as written', async () => {
  expect([...recipes.keys()]).toEqual([
    'prod-destroy-needs-security',
    'never-destroy-databases',
    'big-change-two-approvals',
    'prod-needs-terraform-plans',
    'no-local-exec',
    'warn-iam',
  ]);
  for (const policies of recipes.values()) {
    const saved = ok(
      await world.gql<{ updateEnvironmentPolicy: { planPolicies: { name: string }[] } }>(
        world.admin,
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { planPolicies { name } } }',
        { input: { environment: 'staging', planPolicies: policies } },
      ),
    ).updateEnvironmentPolicy;
    expect(saved.planPolicies.map((p) => p.name)).toEqual(policies.map((p) => p.name));
  }
});

test('no destroy in prod without the security group', async () => {
  const recipe = 'prod-destroy-needs-security';
  expect(await decides(recipe, { content: destroyBucket })).toBe(true);
  expect(
    await decides(recipe, { content: terraform(['aws_instance', ['delete', 'create']]) }),
  ).toBe(true);
  expect(await decides(recipe, { content: destroyBucket, by: securityReviewer })).toBe(false);
  expect(await decides(recipe, { content: destroyBucket, environment: 'staging' })).toBe(false);
  expect(await decides(recipe, { content: createBucket })).toBe(false);
});

test('never destroy a database', async () => {
  const recipe = 'never-destroy-databases';
  expect(await decides(recipe, { content: terraform(['aws_db_instance', ['delete']]) })).toBe(true);
  expect(
    await decides(recipe, {
      content: terraform(['aws_rds_cluster', ['create', 'delete']]),
      environment: 'staging',
    }),
  ).toBe(true);
  expect(
    await decides(recipe, { content: terraform(['azurerm_postgresql_server', ['delete']]) }),
  ).toBe(true);
  expect(await decides(recipe, { content: terraform(['aws_db_instance', ['update']]) })).toBe(
    false,
  );
  expect(await decides(recipe, { content: destroyBucket })).toBe(false);
});

test('two approvals above 20 changes', async () => {
  const recipe = 'big-change-two-approvals';
  const creates = (n: number) =>
    terraform(...Array.from({ length: n }, (): [string, string[]] => ['aws_instance', ['create']]));
  expect(await decides(recipe, { content: creates(21) })).toBe(true);
  expect(await decides(recipe, { content: creates(20) })).toBe(false);
  expect(
    await decides(recipe, {
      content: terraform(
        ...Array.from({ length: 30 }, (): [string, string[]] => ['aws_instance', ['no-op']]),
      ),
    }),
  ).toBe(false);
});

test('TEXT plans refused in prod: tried, and submitted', async () => {
  const recipe = 'prod-needs-terraform-plans';
  expect(await decides(recipe, { content: 'scale web to 3', type: 'TEXT' })).toBe(true);
  expect(await decides(recipe, { content: createBucket })).toBe(false);
  expect(
    await decides(recipe, { content: 'scale web to 3', type: 'TEXT', environment: 'staging' }),
  ).toBe(false);
  ok(
    await world.gql(
      world.admin,
      'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
      { input: { environment: 'prod', planPolicies: recipes.get(recipe) } },
    ),
  );
  const generation = await world.acquire(agent, 'prod');
  const submitted = await world.submit(agent, 'prod', generation, 'scale web to 3');
  expect(submitted.errors![0].extensions).toEqual({
    code: 'POLICY_DENIED',
    policy: recipe,
    message: 'prod takes Terraform plans only (terraform show -json)',
  });
});

withTerraform('no commands on the machine that applies, with real plans', () => {
  const dir = scratchDir();
  const tf = (...args: string[]) => runProgram('terraform', [`-chdir=${dir.path}`, ...args]);
  /** The JSON of a real plan of this configuration. */
  const planOf = async (config: string): Promise<string> => {
    writeFileSync(join(dir.path, 'main.tf'), config);
    expect(await tf('init', '-input=false', '-no-color')).toMatchObject({ code: 0 });
    expect(await tf('plan', '-input=false', '-no-color', '-out=p.tfplan')).toMatchObject({
      code: 0,
    });
    return (await tf('show', '-json', 'p.tfplan')).stdout;
  };
  afterAll(() => dir.cleanup());

  test('a local-exec provisioner, in a module too, is listed for the reviewer and denied; a plan without one passes', async () => {
    mkdirSync(join(dir.path, 'build'), { recursive: true });
    writeFileSync(
      join(dir.path, 'build', 'main.tf'),
      'resource "terraform_data" "step" {\n  provisioner "local-exec" { command = "id > /tmp/owned" }\n}\n',
    );
    const dangerous = await planOf(
      'resource "terraform_data" "app" { input = "v1" }\nmodule "build" { source = "./build" }\n',
    );
    expect(await decides('no-local-exec', { content: dangerous })).toBe(true);
    const submitted = await world.gql<{
      submitPlan: {
        summary: { provisioners: { address: string; type: string; command: string }[] };
      };
    }>(
      agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { summary { provisioners { address type command } } } }',
      {
        input: {
          environment: 'staging',
          generation: await world.acquire(agent, 'staging', 600),
          content: dangerous,
          contentType: 'TERRAFORM_PLAN_JSON',
          idempotencyKey: `local-exec-${Date.now()}`,
        },
      },
    );
    // staging has no policy that denies it: the reviewer sees the command.
    expect(ok(submitted).submitPlan.summary.provisioners).toEqual([
      {
        address: 'module.build.terraform_data.step',
        type: 'local-exec',
        command: 'id > /tmp/owned',
      },
    ]);
    const harmless = await planOf('resource "terraform_data" "app" { input = "v2" }\n');
    expect(await decides('no-local-exec', { content: harmless })).toBe(false);
  });
});

test('a warning for reviewers', async () => {
  expect(await decides('warn-iam', { content: terraform(['aws_iam_role', ['create']]) })).toBe(
    true,
  );
  expect(await decides('warn-iam', { content: createBucket })).toBe(false);
});

const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const built = existsSync(BIN);

// The command line is a client of the service's HTTP API, the same whatever database the
// service runs on: it is proven once, in the SQLite project.
(built && TEST_DATABASE === 'sqlite' ? test : test.skip)(
  'planfence env policy --policy-file and planfence policy test (the built command line)',
  async () => {
    const dir = scratchDir();
    const run = (token: string, ...args: string[]) =>
      new Promise<{ code: number; stdout: string }>((resolve) => {
        const env = { ...process.env, PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token };
        execFile(process.execPath, [BIN, ...args], { env }, (error, stdout) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, stdout }),
        );
      });
    try {
      const policies = join(dir.path, 'policies.yaml');
      writeFileSync(policies, files[1]);
      const destroy = join(dir.path, 'destroy.json');
      writeFileSync(destroy, terraform(['aws_db_instance', ['delete']]));
      const benign = join(dir.path, 'benign.json');
      writeFileSync(benign, createBucket);

      const set = await run(
        world.admin,
        'env',
        'policy',
        'staging',
        '--policy-file',
        policies,
        '--json',
      );
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({
        planPolicies: [{ name: 'never-destroy-databases', effect: 'DENY' }],
      });
      const refused = await run(reviewer, 'policy', 'test', 'staging', '--file', destroy);
      expect(refused.code).toBe(9);
      expect(refused.stdout).toContain('never-destroy-databases');
      expect((await run(reviewer, 'policy', 'test', 'staging', '--file', benign)).code).toBe(0);
      // Before saving: the file's policies, on an environment that has others.
      const tried = await run(
        reviewer,
        'policy',
        'test',
        'prod',
        '--file',
        destroy,
        '--policy-file',
        policies,
        '--json',
      );
      expect(tried.code).toBe(9);
      expect(JSON.parse(tried.stdout)).toEqual([
        expect.objectContaining({ policy: 'never-destroy-databases', matched: true }),
      ]);
      const broken = join(dir.path, 'broken.yaml');
      writeFileSync(
        broken,
        '- name: x\n  effect: DENY\n  message: m\n  expression: "summary.destroy >"\n',
      );
      expect(
        (await run(world.admin, 'env', 'policy', 'staging', '--policy-file', broken)).code,
      ).toBe(2);
    } finally {
      dir.cleanup();
    }
  },
);
