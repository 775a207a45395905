/**
 * DESIGN §21 (R48, R49): what MCP's clients do outside the service. A reviewer follows the
 * reviewUrl submit_plan returned in a browser; examples/mcp-agent.ts, paused past its lease,
 * is refused; `planfence mcp` exits with a message for what it cannot bridge. They drive a
 * browser and processes besides the service, the same whatever database the service runs
 * on: a system suite (`npm run test:rest`), on SQLite. test/mcp.test.ts proves the tools.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { startApp, type TestApp } from './support/app.js';
import { launchChromium } from './support/browser.js';
import { BIN, connectMcp, type McpAgent } from './support/mcp.js';
import { World } from './support/world.js';

const EXAMPLE = fileURLToPath(new URL('../dist/examples/mcp-agent.js', import.meta.url));

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};
const agents: McpAgent[] = [];

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  for (const [name, role] of [
    ['agent-a', 'AGENT'],
    ['reviewer', 'REVIEWER'],
    ['viewer', 'VIEWER'],
  ] as const)
    tokens[name] = await world.issue(name, role);
});

afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

afterAll(async () => {
  await app.close();
});

async function connect(token: string): Promise<McpAgent> {
  const agent = await connectMcp(app.url, token, 'http');
  agents.push(agent);
  return agent;
}

let environments = 0;
async function freshEnvironment(): Promise<string> {
  const name = `mcp-${++environments}`;
  await world.createEnvironment(name, 'MONOTONIC');
  return name;
}

describe('the console opens a plan from its reviewUrl', () => {
  let browser: Browser;
  const dialogs: string[] = [];
  beforeAll(async () => {
    ({ browser } = await launchChromium());
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  // proves: R49
  test('a reviewer follows the reviewUrl submit_plan returned, signs in, sees that plan and approves it', async () => {
    const env = await freshEnvironment();
    const agent = await connect(tokens['agent-a']);
    const { generation } = await agent.ok('acquire_lease', { environment: env, ttlSeconds: 300 });
    const { plan } = await agent.ok('submit_plan', {
      environment: env,
      generation,
      content: 'replicas: 6\n',
      title: 'six replicas',
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(plan.reviewUrl);
    await page.fill('#token', tokens.reviewer);
    await page.click('button[type=submit]');
    // Nothing else is clicked: the page opens the plan its address names.
    await page.locator('#plan-view').waitFor({ state: 'visible' });
    expect(await page.locator('#plan-id').textContent()).toBe(plan.id);
    expect(await page.locator('#plan-title').textContent()).toBe('six replicas');
    expect(await page.locator('#plan-status').textContent()).toBe('PROPOSED');
    await page.click('#approve');
    await page.locator('#plan-notice', { hasText: `Published ${plan.id}.` }).waitFor();
    expect((await agent.ok('get_plan', { planId: plan.id })).plan.status).toBe('PUBLISHED');
    expect(dialogs).toEqual([]);
  });
});

describe('examples/mcp-agent.ts', () => {
  let live: TestApp;
  afterAll(async () => {
    await live?.close();
  });

  test('the scripted agent is paused past its lease and gets the fenced refusal', async () => {
    // The service's own clock: the example really waits past its 2-second lease.
    live = await startApp({}, null);
    const w = new World(live);
    await w.createEnvironment('prod', 'MONOTONIC');
    const env = {
      ...process.env,
      PLANFENCE_URL: live.url,
      PLANFENCE_TOKEN: await w.issue('example-a', 'AGENT'),
      PLANFENCE_TOKEN_B: await w.issue('example-b', 'AGENT'),
    };
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [EXAMPLE], { env }, (error, out, err) =>
        error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out),
      ),
    );
    expect(stdout).toContain("A's submit_plan: isError=true");
    expect(stdout).toContain('"code":"STALE_GENERATION","generation":1,"fence":2');
    expect(stdout).toContain('take a new lease and plan again');

    // Run again while another agent holds the lease: it stops with the refusal, exit code 1.
    const holder = await w.issue('example-holder', 'AGENT');
    await w.acquire(holder, 'prod', 300);
    const refused = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
      execFile(process.execPath, [EXAMPLE], { env }, (error, _out, err) =>
        resolve({ code: error ? Number(error.code) : 0, stderr: err }),
      ),
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('A got no lease on prod: LEASE_HELD');
  });
});

describe('planfence mcp (stdio)', () => {
  const run = (token: string) =>
    new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, 'mcp', '--url', app.url, '--token', token],
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
      );
    });

  test('an ADMIN token: exits with a message', async () => {
    const { code, stderr } = await run(world.admin);
    expect(code).toBe(3);
    expect(stderr).toMatch(/ADMIN tokens are refused on MCP/);
  });

  test('no service at the URL: exits 8 with a message', async () => {
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, 'mcp', '--url', 'http://127.0.0.1:1', '--token', tokens.viewer],
        (error, _stdout, err) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, stderr: err }),
      );
    });
    expect(code).toBe(8);
    expect(stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1\/mcp/);
  });

  test('a bad token: exits with a message', async () => {
    const { code, stderr } = await run('pf_not_a_token');
    expect(code).toBe(3);
    expect(stderr).toMatch(/refused this token/);
  });
});
