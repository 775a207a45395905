/**
 * The dashboard in a real browser (the system's Chromium, else the one npm installs,
 * driven by playwright-core): it shows a plan published through the API and a stale
 * agent's rejection without a reload, and it stays live over 2,000 environments with
 * one list request and one subscription. Screenshots are saved to test-output/.
 */
import { existsSync, mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { CONSOLE_MODULES } from '../src/dashboard/dashboard.controller.js';
import { launchChromium } from './support/browser.js';
import { ADMIN_TOKEN, startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';

const SCREENSHOT = new URL('../test-output/dashboard.png', import.meta.url);
const SCREENSHOT_MANY = new URL('../test-output/dashboard-fleet.png', import.meta.url);

let app: TestApp;
let world: World;
let browser: Browser;

async function signIn(token: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(app.url);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  return page;
}

beforeAll(async () => {
  // The fleet of environments is created by one ADMIN as fast as the service takes it.
  app = await startApp(
    { PLANFENCE_RATE_WRITES_BURST: '100000', PLANFENCE_RATE_REQUESTS_BURST: '100000' },
    new ManualClock(Date.now()),
  );
  world = new World(app);
  ({ browser } = await launchChromium());
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

test('a viewer watches a plan get published and a stale agent get turned away, live', async () => {
  const viewer = await world.issue('viewer', 'VIEWER');
  const agentA = await world.issue('agent-a', 'AGENT');
  const agentB = await world.issue('agent-b', 'AGENT');
  await world.createEnvironment('prod', 'STRICT', false);
  await world.createEnvironment('staging', 'MONOTONIC');

  const page = await signIn(viewer);
  await page.locator('section[data-env="prod"]').waitFor();
  await page.locator('#status.live').waitFor();
  expect(await page.locator('#login').isHidden()).toBe(true);
  await page.locator('section[data-env="prod"] .current.none').waitFor();

  // A holds generation 1 and pauses; B takes generation 2 and publishes.
  const stale = await world.acquire(agentA, 'prod', 5);
  world.advance(6);
  const fresh = await world.acquire(agentB, 'prod', 600);
  const plan = await world.submitOk(agentB, 'prod', fresh, 'scale web to 4', {
    title: 'resize web',
  });

  const prod = page.locator('section[data-env="prod"]');
  await prod.locator('.current-id', { hasText: plan.id }).waitFor({ timeout: 30_000 });
  await prod.locator('.lease', { hasText: 'agent-b · generation 2' }).waitFor();

  // A resumes and sends its old plan: rejected, and the dashboard shows it.
  await world.submit(agentA, 'prod', stale, 'scale web to 2');
  await prod
    .locator('.rejections .code', { hasText: 'STALE_GENERATION' })
    .waitFor({ timeout: 30_000 });
  await expect(prod.locator('.fence').textContent()).resolves.toBe('2');
  await expect(prod.locator('.current').textContent()).resolves.toContain('resize web');

  // A waits its turn for the lease: the queue shows it.
  ok(await world.gql(agentA, 'mutation { enqueueLease(input: { environment: "prod" }) { id } }'));
  await prod.locator('.lease-queue li', { hasText: 'agent-a' }).waitFor({ timeout: 30_000 });
  await expect(prod.locator('.queue-mode').textContent()).resolves.toBe('FIFO');

  mkdirSync(new URL('.', SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT.pathname, fullPage: true });
  expect(existsSync(SCREENSHOT)).toBe(true);
  // Leave the page (its subscription would draw every environment the next case creates).
  // Not closed: a single-process Chromium exits with its last page.
  await page.goto('about:blank');
}, 60_000);

/**
 * Creates environments through the API, many per request (aliases), a few requests at a
 * time. An answer of RATE_LIMITED is honoured: the service clock moves on and the refused
 * names are sent again.
 */
async function createEnvironments(names: string[], perRequest = 20, parallel = 4): Promise<void> {
  const batches: string[][] = [];
  for (let i = 0; i < names.length; i += perRequest) batches.push(names.slice(i, i + perRequest));
  const worker = async () => {
    for (let batch = batches.shift(); batch; batch = batches.shift()) {
      const fields = batch.map(
        (name, i) =>
          `e${i}: createEnvironment(input: { name: "${name}", requireApproval: false }) { name }`,
      );
      let result;
      try {
        result = await app.gql(ADMIN_TOKEN, `mutation { ${fields.join(' ')} }`);
      } catch (error) {
        // A pooled connection the service closed as idle (keep-alive) just as it was reused:
        // the batch is sent again; names it already created answer ALREADY_EXISTS.
        // fetch's TypeError comes from another realm under jest's VM modules: compare by name.
        if ((error as Error | undefined)?.name !== 'TypeError') throw error;
        batches.push(batch);
        continue;
      }
      const refused = (result.errors ?? []).filter((e) => e.extensions?.code === 'RATE_LIMITED');
      const other = (result.errors ?? []).filter(
        (e) => e.extensions?.code !== 'RATE_LIMITED' && e.extensions?.code !== 'ALREADY_EXISTS',
      );
      if (other.length || result.status >= 500) throw new Error(JSON.stringify(other));
      if (refused.length) {
        const wait = Math.max(...refused.map((e) => Number(e.extensions?.retryAfterSeconds ?? 1)));
        world.advance(wait);
        await new Promise((resolve) => setTimeout(resolve, 100));
        batches.push(batch.filter((_, i) => !result.data?.[`e${i}`]));
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

/**
 * The fleet: 2,000 environments. What the page must do with them (one list request, one
 * subscription) is the same at any count; the time a browser on a loaded machine takes to
 * draw them is not what this test is about.
 */
const FLEET = 2000;

test('with thousands of environments one list request shows them all and one subscription keeps them live', async () => {
  const fleet = Array.from({ length: FLEET }, (_, i) => `fleet-${String(i).padStart(5, '0')}`);
  await createEnvironments(fleet);
  const total = ok(await world.gql(ADMIN_TOKEN, '{ environments { name } }')).environments.length;
  expect(total).toBeGreaterThanOrEqual(FLEET);
  const viewer = await world.issue('fleet-viewer', 'VIEWER');
  const agent = await world.issue('fleet-agent', 'AGENT');

  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const listRequests: string[] = [];
  const subscriptions: string[] = [];
  page.on('request', (request) => {
    const body = request.postData() ?? '';
    if (request.url().endsWith('/graphql') && body.includes('environments('))
      listRequests.push(body);
  });
  page.on('websocket', (socket) =>
    socket.on('framesent', ({ payload }) => {
      if (String(payload).includes('"subscribe"')) subscriptions.push(String(payload));
    }),
  );
  await page.goto(app.url);
  await page.fill('#token', viewer);
  await page.click('button[type=submit]');
  await page.locator('#status.live').waitFor({ timeout: 120_000 });
  expect(await page.locator('section.env').count()).toBe(total);
  expect(listRequests).toHaveLength(1);
  expect(subscriptions).toHaveLength(1);

  // A publication far below the fold reaches the page without a reload.
  const target = fleet[Math.floor(FLEET * 0.6283)];
  const generation = await world.acquire(agent, target, 600);
  const plan = await world.submitOk(agent, target, generation, 'rotate keys', {
    title: 'rotate',
  });
  await page.waitForFunction(
    ([name, id]) =>
      (globalThis as any).document.querySelector(`section[data-env="${name}"] .current-id`)
        ?.textContent === id,
    [target, plan.id],
    { timeout: 60_000 },
  );
  const section = page.locator(`section[data-env="${target}"]`);
  await section.scrollIntoViewIfNeeded();
  await section.locator('.plans td', { hasText: plan.id }).waitFor({ timeout: 60_000 });
  await expect(section.locator('.fence').textContent()).resolves.toBe(String(generation));
  expect(listRequests).toHaveLength(1);
  expect(subscriptions).toHaveLength(1);

  mkdirSync(new URL('.', SCREENSHOT_MANY), { recursive: true });
  await page.screenshot({ path: SCREENSHOT_MANY.pathname });
  expect(existsSync(SCREENSHOT_MANY)).toBe(true);
  await page.close();
}, 900_000);

test('environments page through in name order; without arguments all of them', async () => {
  const viewer = await world.issue('pager', 'VIEWER');
  const page = (first: number | null, after: string | null) =>
    world.gql<{ environments: { name: string }[] }>(
      viewer,
      'query($first: Int, $after: String) { environments(first: $first, after: $after) { name } }',
      { first, after },
    );
  const all = ok(await page(null, null)).environments.map((e) => e.name);
  expect(all).toEqual([...all].sort());
  expect(all).toEqual(expect.arrayContaining(['prod', 'staging']));

  const paged: string[] = [];
  let after: string | null = null;
  for (;;) {
    const names: string[] = ok(await page(1500, after)).environments.map((e) => e.name);
    paged.push(...names);
    if (names.length < 1500) break;
    after = names[names.length - 1];
  }
  expect(paged).toEqual(all);

  expect(codeOf(await page(0, null))).toBe('BAD_USER_INPUT');
  expect(codeOf(await page(10_001, null))).toBe('BAD_USER_INPUT');
  expect(codeOf(await page(10, 'Not A Name'))).toBe('BAD_USER_INPUT');
});

test('the assets are small and served without any CDN', async () => {
  const modules = CONSOLE_MODULES.map((name) => `/js/${name}`);
  for (const path of ['/', ...modules, '/dashboard.css']) {
    const response = await fetch(`${app.url}${path}`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.length).toBeLessThan(20_000);
    expect(text).not.toMatch(/https?:\/\/(?!\$\{)/);
  }
});
