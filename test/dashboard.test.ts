/**
 * The dashboard in a real browser (Debian's Chromium driven by playwright-core): it
 * shows a plan published through the API and a stale agent's rejection without a
 * reload. The screenshot is saved to test-output/dashboard.png.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { startApp, type TestApp } from './support/app.js';
import { World } from './support/world.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOT = new URL('../test-output/dashboard.png', import.meta.url);

let app: TestApp;
let world: World;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  app = await startApp({}, new ManualClock(Date.now()));
  world = new World(app);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 60_000);
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

  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(app.url);
  await page.fill('#token', viewer);
  await page.click('button[type=submit]');
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
  await prod.locator('.current-id', { hasText: plan.id }).waitFor({ timeout: 10_000 });
  await prod.locator('.lease', { hasText: 'agent-b · generation 2' }).waitFor();

  // A resumes and sends its old plan: rejected, and the dashboard shows it.
  await world.submit(agentA, 'prod', stale, 'scale web to 2');
  await prod
    .locator('.rejections .code', { hasText: 'STALE_GENERATION' })
    .waitFor({ timeout: 10_000 });
  await expect(prod.locator('.fence').textContent()).resolves.toBe('2');
  await expect(prod.locator('.current').textContent()).resolves.toContain('resize web');

  mkdirSync(new URL('.', SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT.pathname, fullPage: true });
  expect(existsSync(SCREENSHOT)).toBe(true);
}, 60_000);

test('the assets are small and served without any CDN', async () => {
  for (const path of ['/', '/dashboard.js', '/dashboard.css']) {
    const response = await fetch(`${app.url}${path}`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.length).toBeLessThan(20_000);
    expect(text).not.toMatch(/https?:\/\/(?!\$\{)/);
  }
});
