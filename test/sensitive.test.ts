/**
 * DESIGN R54: no door but the plan file hands out a sensitive value. A real Terraform plan
 * (terraform 1.11, built-in terraform_data, local backend) whose variable is declared
 * sensitive and whose attribute is wrapped in sensitive(), both rotated since the last apply,
 * is submitted; neither the old nor the new secret appears in any GraphQL answer (every role
 * reading `content` and `summary`), MCP get_plan, `planfence plan show` (text and --json),
 * the console's page, a webhook body, an audit row or a log line. The plan file is refused to
 * AGENT, REVIEWER and VIEWER. The rotated values still show as a changed row in the console.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Browser } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { PLANFENCE_BIN as BIN, run, withTerraform } from './support/commands.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { launchChromium } from './support/browser.js';
import { connectMcp } from './support/mcp.js';
import { Receiver } from './support/receiver.js';
import { until } from './support/until.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

withTerraform('R54: sensitive values stay in the plan file', () => {
  const dir = scratchDir();
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const receiver = new Receiver();
  let app: TestApp;
  let world: World;
  let browser: Browser;
  const tokens: Record<string, string> = {};
  /** Every secret: the variable's and the attribute's, before and after the rotation. */
  const secrets: string[] = [];
  let planId = '';
  let artifact = '';

  const tf = async (...args: string[]) => {
    const ran = await run('terraform', [`-chdir=${dir.path}`, ...args]);
    expect(ran).toMatchObject({ code: 0 });
    return ran;
  };
  const planfence = (token: string, ...args: string[]) =>
    run(process.execPath, [BIN, ...args], { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token });
  const expectNoSecret = (where: string, text: string) => {
    for (const secret of secrets) {
      if (text.includes(secret)) throw new Error(`${where} reveals the secret ${secret}`);
    }
  };

  beforeAll(async () => {
    await receiver.start();
    app = await startApp(
      { PLANFENCE_WEBHOOK_POLL_MS: '50' },
      new ManualClock(Date.now()),
      pino({ level: 'debug' }, sink),
    );
    world = new World(app);
    for (const [name, role] of [
      ['agent', 'AGENT'],
      ['reviewer', 'REVIEWER'],
      ['viewer', 'VIEWER'],
      ['deployer', 'DEPLOYER'],
    ] as const)
      tokens[role] = await world.issue(name, role);
    tokens.ADMIN = world.admin;
    await world.createEnvironment('secrets', 'MONOTONIC', true);
    ok(
      await world.gql(
        world.admin,
        'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { secret } }',
        { input: { url: receiver.url, events: ['plan.submitted', 'plan.published'] } },
      ),
    );

    // Applied once with the first secrets, then planned with rotated ones.
    const salt = randomBytes(6).toString('hex');
    const [oldPassword, newPassword, oldToken, newToken] = ['pw1', 'pw2', 'tk1', 'tk2'].map(
      (prefix) => `${prefix}-${salt}`,
    );
    secrets.push(oldPassword, newPassword, oldToken, newToken);
    writeFileSync(
      join(dir.path, 'main.tf'),
      `variable "db_password" {
  type      = string
  sensitive = true
}
variable "api_token" { type = string }
resource "terraform_data" "db" {
  input = { user = "admin", password = var.db_password }
}
resource "terraform_data" "api" {
  input = sensitive(var.api_token)
}
resource "terraform_data" "plain" { input = "visible-\${length(var.api_token)}" }
output "password" {
  value     = var.db_password
  sensitive = true
}
`,
    );
    await tf('init', '-input=false', '-no-color');
    await tf(
      'apply',
      '-auto-approve',
      '-input=false',
      '-no-color',
      `-var=db_password=${oldPassword}`,
      `-var=api_token=${oldToken}`,
    );
    await tf(
      'plan',
      '-input=false',
      '-no-color',
      `-var=db_password=${newPassword}`,
      `-var=api_token=${newToken}`,
      '-out=rotated.tfplan',
    );
    const shown = await tf('show', '-json', 'rotated.tfplan');
    // The document as terraform writes it holds the secrets: that is what is to be kept in.
    expect(shown.stdout).toContain(newPassword);
    artifact = readFileSync(join(dir.path, 'rotated.tfplan')).toString('base64');

    const generation = await world.acquire(tokens.AGENT, 'secrets', 600);
    const submitted = await world.gql<{ submitPlan: { id: string; content: string } }>(
      tokens.AGENT,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id content } }',
      {
        input: {
          environment: 'secrets',
          generation,
          content: shown.stdout,
          contentType: 'TERRAFORM_PLAN_JSON',
          artifact,
          title: 'rotate the secrets',
          idempotencyKey: freshKey(),
        },
      },
    );
    planId = ok(submitted).submitPlan.id;
    expectNoSecret('the submit answer', JSON.stringify(submitted));
    ({ browser } = await launchChromium());
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await receiver.stop();
    dir.cleanup();
  });

  // proves: R54
  test('GraphQL: content and summary read masked for every role; the plan file only for DEPLOYER and ADMIN', async () => {
    const query = `query($id: ID!) { plan(id: $id) { id content contentHash
      summary { change resourceChanges { address before after sensitiveChanges } } } }`;
    for (const role of ['AGENT', 'REVIEWER', 'VIEWER', 'DEPLOYER', 'ADMIN']) {
      const read = await world.gql<{ plan: { content: string } }>(tokens[role], query, {
        id: planId,
      });
      expect(ok(read).plan.content).toContain('(sensitive)');
      expectNoSecret(`plan.content read by ${role}`, JSON.stringify(read));
    }
    const artifactQuery = 'query($id: ID!) { plan(id: $id) { artifact } }';
    for (const role of ['AGENT', 'REVIEWER', 'VIEWER']) {
      const refused = await world.gql(tokens[role], artifactQuery, { id: planId });
      expect(codeOf(refused)).toBe('FORBIDDEN');
    }
    for (const role of ['DEPLOYER', 'ADMIN']) {
      const read = await world.gql<{ plan: { artifact: string } }>(tokens[role], artifactQuery, {
        id: planId,
      });
      expect(ok(read).plan.artifact).toBe(artifact);
    }
  });

  // proves: R54
  test('a rotated sensitive value is a changed row, its values masked', async () => {
    const read = await world.gql<{
      plan: { summary: { resourceChanges: { address: string; sensitiveChanges: string[] }[] } };
    }>(
      tokens.REVIEWER,
      'query($id: ID!) { plan(id: $id) { summary { resourceChanges { address sensitiveChanges } } } }',
      { id: planId },
    );
    const changes = Object.fromEntries(
      ok(read).plan.summary.resourceChanges.map((change) => [
        change.address,
        change.sensitiveChanges,
      ]),
    );
    expect(changes['terraform_data.db']).toContain('input');
    expect(changes['terraform_data.api']).toContain('input');
  });

  // proves: R54
  test('MCP get_plan, over HTTP, hands the agent the masked document', async () => {
    const agent = await connectMcp(app.url, tokens.AGENT, 'http');
    try {
      const result = await agent.client.callTool({ name: 'get_plan', arguments: { planId } });
      expect(result.isError).toBeFalsy();
      expect(JSON.stringify(result)).toContain('(sensitive)');
      expectNoSecret('MCP get_plan', JSON.stringify(result));
    } finally {
      await agent.close();
    }
  });

  // proves: R54
  test('planfence plan show, as text and as JSON, for every role', async () => {
    for (const role of ['AGENT', 'REVIEWER', 'VIEWER', 'DEPLOYER', 'ADMIN']) {
      for (const args of [
        ['plan', 'show', planId],
        ['plan', 'show', planId, '--json'],
      ]) {
        const shown = await planfence(tokens[role], ...args);
        expect({ code: shown.code, stderr: shown.stderr }).toEqual({ code: 0, stderr: '' });
        expectNoSecret(`${args.join(' ')} as ${role}`, shown.stdout + shown.stderr);
      }
    }
  });

  // proves: R54
  test("the console's page of the plan, with the rotated values as changed rows", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
    try {
      await page.goto(app.url);
      await page.fill('#token', tokens.REVIEWER);
      await page.click('button[type=submit]');
      await page.locator('#status.live').waitFor();
      await page.goto(`${app.url}/?plan=${encodeURIComponent(planId)}`);
      // Signed in already (the page keeps the token): the review URL opens the plan.
      await page.locator('#plan-id', { hasText: planId }).waitFor();
      await page.locator('#plan-summary .group').first().waitFor();
      const db = page.locator('details[data-address="terraform_data.db"] tbody');
      await expect(db.textContent()).resolves.toContain('(sensitive)');
      expectNoSecret('the console page', await page.content());
    } finally {
      await page.close();
    }
  });

  // proves: R54
  test('webhook bodies, audit rows and log lines', async () => {
    ok(await world.approve(tokens.REVIEWER, planId));
    await until('plan.submitted and plan.published delivered', () =>
      receiver.received.some((r) => r.event === 'plan.published'),
    );
    for (const request of receiver.received) expectNoSecret('a webhook body', request.body);
    expectNoSecret('the audit log', JSON.stringify(await world.auditEvents('secrets')));
    expect(logs.length).toBeGreaterThan(0);
    expectNoSecret('the log', logs.join(''));
  });
});
