/**
 * Secrets and policy errors. A policy reads the plan as submitted (sensitive values
 * included); when its evaluation fails, the error stored with the result, in POLICY_DENIED
 * and in the audit log (which a VIEWER reads) names the policy and the kind of error, never
 * a value. And a value marked sensitive only on its `after` side is masked on both sides.
 */
import { parseTerraformPlan } from '../src/terraform/terraform-plan.js';
import { startApp, type TestApp } from './support/app.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

const SECRET = 'hunter2-0123456789abcdef';
const OLD_SECRET = 'oldpass-only-after-marked';
const NEW_SECRET = 'newpass-marked-after';

/** A Terraform plan document: a sensitive variable, and an attribute marked in after_sensitive only. */
const DOCUMENT = JSON.stringify({
  format_version: '1.2',
  terraform_version: '1.11.0',
  variables: { db_password: { value: SECRET } },
  configuration: { root_module: { variables: { db_password: { sensitive: true } } } },
  resource_changes: [
    {
      address: 'terraform_data.db',
      mode: 'managed',
      type: 'terraform_data',
      name: 'db',
      change: {
        actions: ['update'],
        before: { input: { password: OLD_SECRET, user: 'admin' } },
        after: { input: { password: NEW_SECRET, user: 'admin' } },
        after_unknown: {},
        before_sensitive: {},
        after_sensitive: { input: { password: true } },
      },
    },
  ],
});

let app: TestApp;
let world: World;
let agent: string;
let viewer: string;
beforeAll(async () => {
  app = await startApp({
    PLANFENCE_POLICY_BUDGET_MS: '1000',
    PLANFENCE_PLAN_POLICY_BUDGET_MS: '3000',
  });
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  viewer = await world.issue('viewer', 'VIEWER');
});
afterAll(() => app.close());

test('a failing policy over a sensitive value: POLICY_DENIED, results and audit rows name the policy and the kind of error, never the value', async () => {
  await world.createEnvironment('secrets', 'MONOTONIC', false);
  ok(
    await world.gql(
      world.admin,
      `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { policyVersion } }`,
      {
        input: {
          environment: 'secrets',
          planPolicies: [
            {
              name: 'numeric-password',
              expression: 'int(terraform.variables.db_password.value) > 0',
              effect: 'WARN',
              message: 'a numeric password',
            },
          ],
        },
      },
    ),
  );
  const generation = await world.acquire(agent, 'secrets', 600);
  const result = await world.gql(
    agent,
    `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }`,
    {
      input: {
        environment: 'secrets',
        generation,
        content: DOCUMENT,
        contentType: 'TERRAFORM_PLAN_JSON',
        idempotencyKey: freshKey(),
      },
    },
  );
  expect(codeOf(result)).toBe('POLICY_DENIED');
  expect(result.errors![0].extensions).toEqual({
    code: 'POLICY_DENIED',
    policy: 'numeric-password',
    message: 'evaluation failed: a value could not be converted',
  });
  expect(JSON.stringify(result)).not.toContain('hunter2');

  // The audit log, as a VIEWER reads it.
  const audit = await world.gql(
    viewer,
    '{ auditEvents(environment: "secrets", first: 100) { action outcome code detail } }',
  );
  const rows = ok(audit).auditEvents as { action: string; outcome: string; detail: string }[];
  expect(rows.some((r) => r.action === 'SUBMIT_PLAN' && r.outcome === 'REJECTED')).toBe(true);
  expect(JSON.stringify(rows)).not.toContain('hunter2');

  // A dry run says the same.
  const reviewer = await world.issue('reviewer', 'REVIEWER');
  const tried = ok(
    await world.gql<{ dryRunPlanPolicies: { policy: string; error: string | null }[] }>(
      reviewer,
      `query($content: String!) { dryRunPlanPolicies(environment: "secrets", content: $content, contentType: TERRAFORM_PLAN_JSON) { policy error } }`,
      { content: DOCUMENT },
    ),
  ).dryRunPlanPolicies;
  expect(tried).toEqual([{ policy: 'numeric-password', error: 'a value could not be converted' }]);
});

test('a before value whose attribute is marked in after_sensitive only is masked, in the content and in the summary', async () => {
  const parsed = parseTerraformPlan(DOCUMENT);
  for (const text of [parsed.masked, JSON.stringify(parsed.summary)]) {
    expect(text).not.toContain(OLD_SECRET);
    expect(text).not.toContain(NEW_SECRET);
    expect(text).not.toContain(SECRET);
  }
  // Through the service, as a VIEWER reads the stored plan.
  await world.createEnvironment('marked-after', 'MONOTONIC', false);
  const generation = await world.acquire(agent, 'marked-after', 600);
  const plan = await world.submitOk(agent, 'marked-after', generation, DOCUMENT, {
    contentType: 'TERRAFORM_PLAN_JSON',
  });
  const read = ok(
    await world.gql<{
      plan: { content: string; summary: { resourceChanges: { before: string; after: string }[] } };
    }>(
      viewer,
      'query($id: ID!) { plan(id: $id) { content summary { resourceChanges { before after } } } }',
      { id: plan.id },
    ),
  ).plan;
  expect(JSON.stringify(read)).not.toContain(OLD_SECRET);
  expect(JSON.stringify(read)).not.toContain(NEW_SECRET);
  expect(JSON.parse(read.summary.resourceChanges[0].before).input.password).toBe('(sensitive)');
  expect(JSON.parse(read.summary.resourceChanges[0].after).input.password).toBe('(sensitive)');
});
