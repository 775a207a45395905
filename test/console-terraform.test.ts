/**
 * The console's view of a Terraform plan in a real browser (DESIGN R32): the summary first
 * (counts, the changed resources grouped by action, replacements and destroys on top, the
 * attribute changes of each), sensitive values masked, and no sensitive value in the page
 * or in any answer the browser receives. The review queue shows the counts. Screenshot
 * test-output/console-terraform.png (docs/pictures/ with PLANFENCE_DOCS_PICTURES=1).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { consoleSuite } from './support/console.js';
import { freshKey, ok, World } from './support/world.js';
import { picture, SHOT } from './support/pictures.js';

const FIXTURES = join(process.cwd(), 'test/fixtures/terraform');
/** Values the fixtures hold in clear text and Terraform marks sensitive. */
const SECRETS = [
  'hunter2',
  's3cret',
  'new-db-password-2',
  'old-db-password-1',
  'replica-token-3',
  'api-key-value-9',
];

const suite = consoleSuite();
let world: World;
beforeAll(() => ({ world } = suite));
/** Everything the service sent to the browser: HTTP bodies and WebSocket frames. */
const received: string[] = [];
const errors: string[] = [];
afterEach(() => expect(errors).toEqual([]));

/** A signed-in page whose every answer and frame is kept, and whose script errors are counted. */
function signIn(token: string): Promise<Page> {
  return suite.signIn(token, { width: 1280, height: 1100 }, (page) => {
    page.on('response', (response) => {
      void response.text().then(
        (body) => received.push(body),
        () => undefined,
      );
    });
    page.on('websocket', (socket) => {
      socket.on('framereceived', (frame) => received.push(String(frame.payload)));
    });
    page.on('pageerror', (error) => errors.push(error.message));
  });
}

// proves: R32
test('a reviewer reads a Terraform plan by its summary, destroys and replacements first, with no sensitive value reaching the browser', async () => {
  const reviewer = await world.issue('tara', 'REVIEWER');
  const agent = await world.issue('tf-agent', 'AGENT');
  await world.createEnvironment('tf-prod', 'MONOTONIC');
  const generation = await world.acquire(agent, 'tf-prod', 600);
  // The real plan of the fixtures' working directory, with the hand-written sensitive resources added.
  const mixed = JSON.parse(readFileSync(join(FIXTURES, 'mixed.json'), 'utf8'));
  const sensitive = JSON.parse(readFileSync(join(FIXTURES, 'sensitive.json'), 'utf8'));
  mixed.resource_changes.push(...sensitive.resource_changes.slice(1));
  const content = JSON.stringify(mixed);
  for (const secret of SECRETS) expect(content).toContain(secret);
  const plan = ok(
    await world.gql<{ submitPlan: { id: string; contentHash: string } }>(
      agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id contentHash } }',
      {
        input: {
          environment: 'tf-prod',
          generation,
          content,
          contentType: 'TERRAFORM_PLAN_JSON',
          idempotencyKey: freshKey(),
          title: 'rotate the database',
          sourceRevision: 'abc1234',
        },
      },
    ),
  ).submitPlan;

  const page = await signIn(reviewer);
  const row = page.locator(`#queue-table tr[data-plan="${plan.id}"]`);
  await expect(row.locator('.changes').textContent()).resolves.toBe('+1 ~3 −1 ±2 ↻1 ');
  await row.locator('button').click();
  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  await page.locator('#plan-summary .group').first().waitFor();

  expect(await page.locator('#plan-diff').isHidden()).toBe(true);
  const counts = await page
    .locator('#plan-summary .summary-counts [data-count]')
    .evaluateAll((nodes) =>
      nodes.map((n) => [
        n.getAttribute('data-count'),
        n.textContent,
        (
          n.ownerDocument.defaultView as { getComputedStyle(e: unknown): { color: string } }
        ).getComputedStyle(n).color,
      ]),
    );
  expect(counts.map(([key, text]) => [key, text])).toEqual([
    ['add', '+1'],
    ['change', '~3'],
    ['destroy', '−1'],
    ['replace', '±2'],
    ['read', '↻1'],
  ]);
  // Each count has its own colour.
  expect(new Set(counts.map(([, , color]) => color)).size).toBe(5);

  const groups = await page
    .locator('#plan-summary .group')
    .evaluateAll((nodes) =>
      nodes.map((n) => [
        n.getAttribute('data-group'),
        [...n.querySelectorAll('details')].map((d) => d.getAttribute('data-address')),
      ]),
    );
  expect(groups).toEqual([
    ['replace', ['terraform_data.cache', 'terraform_data.db']],
    ['destroy', ['terraform_data.old[0]']],
    ['change', ['terraform_data.app', 'terraform_data.secret', 'module.db.aws_db_instance.main']],
    ['add', ['aws_ssm_parameter.api_key']],
    ['read', ['data.terraform_remote_state.net']],
  ]);

  // Attribute changes, the sensitive ones masked.
  const db = page.locator('details[data-address="module.db.aws_db_instance.main"]');
  const attributes = await db
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  // The password and the replica tokens changed: both sides read "(sensitive)", and the row
  // says that they changed (R54).
  const masked = '[{"name":"r1","token":"(sensitive)"},{"name":"r2","token":"(sensitive)"}]';
  expect(attributes).toEqual([
    ['instance_class', '"db.t3.micro"', '"db.t3.small"'],
    ['password', '"(sensitive)"', '"(sensitive)"'],
    ['replicas', masked, masked],
  ]);
  const secret = await page
    .locator('details[data-address="terraform_data.secret"] tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  expect(secret).toContainEqual([
    'input',
    '{"password":"(sensitive)","rev":"1","user":"admin"}',
    '{"password":"(sensitive)","rev":"2","user":"admin"}',
  ]);
  await expect(
    page.locator('details[data-address="aws_ssm_parameter.api_key"] tbody').textContent(),
  ).resolves.toContain('"(sensitive)"');
  await expect(page.locator('#plan-based-on').textContent()).resolves.toContain('abc1234');

  await page.locator('#plan-view').screenshot({ path: picture('console-terraform'), ...SHOT });

  // Approving pins the content hash of the plan whose summary was shown.
  await page.click('#approve');
  await page.locator('#plan-status', { hasText: 'PUBLISHED' }).waitFor();
  const approvals = ok(
    await world.gql<{ plan: { approvals: { contentHash: string }[] } }>(
      world.admin,
      'query($id: ID!) { plan(id: $id) { approvals { contentHash } } }',
      { id: plan.id },
    ),
  ).plan.approvals;
  expect(approvals).toEqual([{ contentHash: plan.contentHash }]);

  const dom = await page.content();
  const everything = [dom, ...received].join('\n');
  expect(received.some((body) => body.includes('resourceChanges'))).toBe(true);
  for (const secret of SECRETS) expect(everything).not.toContain(secret);
});

test('the commands a plan runs on the applier are put in front of the reviewer: every provisioner, local-exec named', async () => {
  const reviewer = await world.issue('prov-reviewer', 'REVIEWER');
  const agent = await world.issue('prov-agent', 'AGENT');
  await world.createEnvironment('tf-provisioners', 'MONOTONIC');
  const generation = await world.acquire(agent, 'tf-provisioners', 600);
  // A plan whose changes look harmless; its configuration runs a command where it is applied.
  const content = JSON.stringify({
    format_version: '1.2',
    terraform_version: '1.11.4',
    resource_changes: [
      {
        address: 'module.build.terraform_data.step',
        type: 'terraform_data',
        change: { actions: ['create'], before: null, after: {} },
      },
    ],
    configuration: {
      root_module: {
        module_calls: {
          build: {
            module: {
              resources: [
                {
                  address: 'terraform_data.step',
                  provisioners: [
                    {
                      type: 'local-exec',
                      expressions: { command: { constant_value: 'id > /tmp/x' } },
                    },
                  ],
                },
              ],
            },
          },
        },
      },
    },
  });
  const plan = ok(
    await world.gql<{ submitPlan: { id: string } }>(
      agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
      {
        input: {
          environment: 'tf-provisioners',
          generation,
          content,
          contentType: 'TERRAFORM_PLAN_JSON',
          idempotencyKey: freshKey(),
        },
      },
    ),
  ).submitPlan;
  const page = await signIn(reviewer);
  await page.goto(`${suite.app.url}/?plan=${encodeURIComponent(plan.id)}`);
  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  const provisioners = page.locator('#plan-summary .g-provisioners');
  await provisioners.waitFor();
  const text = await provisioners.textContent();
  expect(text).toContain('1 provisioner: commands the apply runs');
  expect(text).toContain('module.build.terraform_data.step local-exec');
  expect(text).toContain('runs on the machine that applies the plan');
  expect(text).toContain('id > /tmp/x');
});
