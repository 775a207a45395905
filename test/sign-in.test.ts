/**
 * A person signs in to the console in a real browser (DESIGN §19, R40–R43): "Sign in with
 * …" leads to the organisation's provider (the test provider's own login form), back to the
 * console signed in, the person's name shown; the person approves a plan, and the approval
 * and its audit event name the person (issuer, subject, email). A person no rule matches
 * reads why on a page, and nothing is created.
 */
import type { Browser, Page } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { ADMIN_TOKEN, ok } from './support/app.js';
import { launchChromium } from './support/browser.js';
import { type SignInWorld, startSignInWorld } from './support/sign-in.js';
import { World } from './support/world.js';

let world: SignInWorld;
let browser: Browser;
let page: Page;
const dialogs: string[] = [];

beforeAll(async () => {
  world = await startSignInWorld({ clock: new ManualClock(Date.now()) });
  ({ browser } = await launchChromium());
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await world?.close();
});
afterEach(() => expect(dialogs).toEqual([]));

/** Clicks "Sign in with Example SSO" and fills the provider's own login form. */
async function signInThroughProvider(path: string, sub: string): Promise<void> {
  await page.context().clearCookies();
  await page.goto(`${world.app.url}${path}`);
  await page.locator('#sign-in-providers a', { hasText: 'Sign in with Example SSO' }).click();
  await page.waitForURL((url) => url.origin === world.provider.issuer);
  await page.fill('input[name=login]', sub);
  await page.fill('input[name=password]', 'any password');
  await page.locator('button[type=submit]', { hasText: 'Sign-in' }).click();
}

// proves: R40
test('a person no login rule matches reads why on a page; no principal and no session are created', async () => {
  const before = ok(await world.app.gql(ADMIN_TOKEN, '{ principals { name } }')).principals.length;
  await signInThroughProvider('/', 'u-nemo');
  await page.locator('#sign-in-message').waitFor();
  await expect(page.locator('h1').textContent()).resolves.toBe('Sign-in refused');
  await expect(page.locator('#sign-in-message').textContent()).resolves.toContain(
    'No sign-in rule of this service matches your account',
  );
  const cookies = await page.context().cookies(world.app.url);
  expect(cookies.some((c) => c.name === 'planfence_session')).toBe(false);
  expect(ok(await world.app.gql(ADMIN_TOKEN, '{ principals { name } }')).principals).toHaveLength(
    before,
  );
  expect(ok(await world.app.gql(ADMIN_TOKEN, '{ sessions { id } }')).sessions).toEqual([]);
});

// proves: R40, R41, R42, R43
test('a person signs in on the provider, lands on the plan signed in with the name shown, approves it; the approval and the audit name the person', async () => {
  const w = new World(world.app);
  await w.createEnvironment('web-prod', 'MONOTONIC');
  const agent = await w.issue('web-agent', 'AGENT');
  const generation = await w.acquire(agent, 'web-prod', 600);
  const plan = await w.submitOk(agent, 'web-prod', generation, 'replicas: 3\nimage: web:2\n', {
    title: 'scale web',
  });

  const approvals: { headers: Record<string, string> }[] = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && (request.postData() ?? '').includes('approvePlan'))
      approvals.push({ headers: request.headers() });
  });
  // A review link: the person signs in and comes back to it.
  await signInThroughProvider(`/?plan=${encodeURIComponent(plan.id)}`, 'u-rita');
  await page.waitForURL((url) => url.origin === world.app.url);
  await page.locator('#who', { hasText: 'Rita Reviewer' }).waitFor();
  await expect(page.locator('#who').textContent()).resolves.toBe(
    'Rita Reviewer (rita@example.com) · REVIEWER',
  );
  expect(await page.locator('#log-out').isVisible()).toBe(true);
  const cookie = (await page.context().cookies(world.app.url)).find(
    (c) => c.name === 'planfence_session',
  )!;
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false });

  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  await page.locator('#approve').click();
  await page.locator('#plan-notice', { hasText: /\S/ }).waitFor();
  expect(await page.locator('#plan-notice').textContent()).toBe(`Published ${plan.id}.`);
  await page.locator('#plan-status', { hasText: 'PUBLISHED' }).waitFor();
  await page.locator('#plan-approvals', { hasText: 'Rita Reviewer <rita@example.com>' }).waitFor();
  // The console sent the session's CSRF token with the change (R42).
  expect(approvals).toHaveLength(1);
  expect(approvals[0].headers['x-planfence-csrf']).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(approvals[0].headers.authorization).toBeUndefined();

  const { issuer } = world.provider;
  const read = ok(
    await world.app.gql(
      ADMIN_TOKEN,
      'query($id: ID!) { plan(id: $id) { approvals { approver person { issuer subject email name } } } }',
      { id: plan.id },
    ),
  ).plan;
  expect(read.approvals).toEqual([
    {
      approver: 'rita@example.com',
      person: { issuer, subject: 'u-rita', email: 'rita@example.com', name: 'Rita Reviewer' },
    },
  ]);
  const events = (await w.auditEvents('web-prod')) as {
    action: string;
    actor: string;
    detail?: string;
  }[];
  const approval = events.find((e) => e.action === 'APPROVE_PLAN')!;
  expect(approval.actor).toBe('rita@example.com');
  expect(approval.detail).toContain(
    `Rita Reviewer <rita@example.com> (subject u-rita at ${issuer})`,
  );

  // Sign out: the session ends, the page offers the sign-in again.
  await page.locator('#log-out').click();
  await page.locator('#sign-in-providers a').waitFor();
  expect(ok(await world.app.gql(ADMIN_TOKEN, '{ sessions { id } }')).sessions).toEqual([]);
});
