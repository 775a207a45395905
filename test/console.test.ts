/**
 * The reviewer's console in a real browser against the real app over HTTP: the review
 * queue, the plan's diff against the published plan, approvals pinned to the content hash
 * shown, quorum, a plan that turns OBSOLETE while on screen, hostile text, a VIEWER's
 * forged approval, the timeline and the deployment panel. Screenshots go to test-output/
 * (docs/pictures/ with PLANFENCE_DOCS_PICTURES=1, `npm run docs:pictures`).
 */
import type { Page } from 'playwright-core';
import { consoleSuite } from './support/console.js';
import { ADMIN_TOKEN, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';
import { picture, SHOT } from './support/pictures.js';
import { Deployments } from './support/deployers.js';

const shot = (name: string) => ({ path: picture(`console-${name}`), ...SHOT });

const suite = consoleSuite();
let app: TestApp;
let world: World;
beforeAll(() => ({ app, world } = suite));

const signIn = (token: string, width = 1280, height = 800): Promise<Page> =>
  suite.signIn(token, { width, height });

async function issue(name: string, role: string): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    ADMIN_TOKEN,
    'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
    { name, role },
  );
  return ok(result).issueToken.token;
}

async function setRules(environment: string, count: number): Promise<void> {
  ok(
    await world.gql(
      ADMIN_TOKEN,
      'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
      { input: { environment, approvalRules: [{ group: null, count }] } },
    ),
  );
}

async function openFromQueue(page: Page, planId: string): Promise<void> {
  await page.locator(`#queue-table tr[data-plan="${planId}"] button`).click();
  await page.locator('#plan-id', { hasText: planId }).waitFor();
}

// proves: R13
test('a reviewer opens a queued plan, reads its diff, approves what was shown, and the card and timeline move', async () => {
  const reviewer = await world.issue('rita', 'REVIEWER');
  const agent = await world.issue('agent-a', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC');
  const generation = await world.acquire(agent, 'prod', 600);
  const first = await world.submitOk(
    agent,
    'prod',
    generation,
    'replicas: 2\nimage: web:1\nregion: eu\n',
    { title: 'first' },
  );
  ok(await world.approve(ADMIN_TOKEN, first.id));
  const second = await world.submitOk(
    agent,
    'prod',
    generation,
    'replicas: 4\nimage: web:1\nregion: eu\nzone: b\n',
    {
      title: 'scale web to 4',
      basedOnPlanId: first.id,
    },
  );

  const page = await signIn(reviewer);
  const approveRequests: string[] = [];
  page.on('request', (request) => {
    const body = request.postData() ?? '';
    if (body.includes('approvePlan')) approveRequests.push(body);
  });
  await page.locator(`#queue-table tr[data-plan="${second.id}"]`).waitFor();
  await expect(
    page.locator(`#queue-table tr[data-plan="${second.id}"] .missing`).textContent(),
  ).resolves.toContain('1 from any approver');
  await page.screenshot({ ...shot('queue'), fullPage: false });

  await openFromQueue(page, second.id);
  await expect(page.locator('#plan-title').textContent()).resolves.toBe('scale web to 4');
  await expect(page.locator('#plan-based-on').textContent()).resolves.toBe(first.id);
  await expect(page.locator('#plan-base').textContent()).resolves.toBe(first.id);
  expect(await page.locator('#plan-diff .line.del').allTextContents()).toEqual(['- replicas: 2']);
  expect(await page.locator('#plan-diff .line.add').allTextContents()).toEqual([
    '+ replicas: 4',
    '+ zone: b',
  ]);
  expect(await page.locator('#plan-diff .line.same').count()).toBe(2);
  await page.locator('#plan-view').screenshot({ ...shot('plan-diff') });

  const prod = page.locator('section[data-env="prod"]');
  await prod.scrollIntoViewIfNeeded();
  await prod.locator('.timeline svg').waitFor();
  const publicationsBefore = await prod.locator('.timeline .publication').count();

  await page.locator('#approve').click();
  await page.locator('#plan-notice', { hasText: `Published ${second.id}` }).waitFor();
  await prod.locator('.current-id', { hasText: second.id }).waitFor({ timeout: 30_000 });
  await page.waitForFunction(
    ([count]) =>
      (globalThis as any).document.querySelectorAll(
        'section[data-env="prod"] .timeline .publication',
      ).length > count,
    [publicationsBefore],
  );
  await page.locator('#plan-status', { hasText: 'PUBLISHED' }).waitFor();
  await page.locator(`#queue-table tr[data-plan="${second.id}"]`).waitFor({ state: 'detached' });

  // The approval carried the hash of the content on screen.
  expect(approveRequests).toHaveLength(1);
  expect(JSON.parse(approveRequests[0]).variables.input.contentHash).toBe(second.contentHash);
  const stored = await world.gql<{
    plan: { approvals: { approver: string; contentHash: string }[] };
  }>(ADMIN_TOKEN, 'query($id: ID!) { plan(id: $id) { approvals { approver contentHash } } }', {
    id: second.id,
  });
  expect(ok(stored).plan.approvals).toEqual([
    { approver: 'rita', contentHash: second.contentHash },
  ]);
  const audit = await world.auditEvents('prod');
  expect(audit.find((e) => e.action === 'APPROVE_PLAN' && e.actor === 'rita')).toMatchObject({
    outcome: 'ACCEPTED',
    planId: second.id,
  });
}, 90_000);

// proves: R14, R15
test('with a rule of two approvals the first click leaves 1 of 2 and the second publishes; a submitter gets no approve button', async () => {
  const r1 = await world.issue('quorum-one', 'REVIEWER');
  const r2 = await world.issue('quorum-two', 'REVIEWER');
  const agent = await world.issue('quorum-agent', 'AGENT');
  await world.createEnvironment('quorum', 'MONOTONIC');
  await setRules('quorum', 2);
  const generation = await world.acquire(agent, 'quorum', 600);
  const plan = await world.submitOk(agent, 'quorum', generation, 'replicas: 3\n', {
    title: 'two keys',
  });

  const one = await signIn(r1);
  await openFromQueue(one, plan.id);
  await one.locator('#approve').click();
  await one.locator('#plan-notice', { hasText: 'Approval recorded: 1 of 2' }).waitFor();
  await one.locator('#plan-approvals', { hasText: '1 of 2' }).waitFor();
  await expect(one.locator('#plan-status').textContent()).resolves.toBe('PROPOSED');
  expect((await world.plan(plan.id))?.status).toBe('PROPOSED');

  const two = await signIn(r2);
  await openFromQueue(two, plan.id);
  await expect(two.locator('#plan-approvals').textContent()).resolves.toContain('1 of 2');
  await two.locator('#approve').click();
  await two.locator('#plan-notice', { hasText: `Published ${plan.id}` }).waitFor();
  expect((await world.plan(plan.id))?.status).toBe('PUBLISHED');
  // The first reviewer's open view follows without a reload.
  await one.locator('#plan-status', { hasText: 'PUBLISHED' }).waitFor({ timeout: 30_000 });
  await one.locator('#plan-approvals', { hasText: '2 of 2' }).waitFor();

  // An ADMIN who submitted a plan sees it, but no approve button on it.
  await world.createEnvironment('quorum-own', 'MONOTONIC');
  const own = await world.acquire(ADMIN_TOKEN, 'quorum-own', 600);
  const mine = await world.submitOk(ADMIN_TOKEN, 'quorum-own', own, 'replicas: 5\n', {
    title: 'mine',
  });
  const admin = await signIn(ADMIN_TOKEN);
  await admin.locator(`section[data-env="quorum-own"] .open-plan[data-plan="${mine.id}"]`).click();
  await admin.locator('#plan-id', { hasText: mine.id }).waitFor();
  expect(await admin.locator('#approve').isHidden()).toBe(true);
  await expect(admin.locator('#plan-reason').textContent()).resolves.toContain(
    'You submitted this plan',
  );
}, 90_000);

// proves: R35
test('the plan view shows its policy results: a warning in amber, a required approval with what is still missing', async () => {
  const reviewer = await world.issue('policy-reader', 'REVIEWER');
  const agent = await world.issue('policy-agent', 'AGENT');
  await world.createEnvironment('policed', 'MONOTONIC');
  ok(
    await world.gql(
      ADMIN_TOKEN,
      'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
      {
        input: {
          environment: 'policed',
          planPolicies: [
            {
              name: 'hotfix',
              expression: 'plan.title.contains("hotfix")',
              effect: 'WARN',
              message: 'a hotfix: read twice',
            },
            {
              name: 'two-eyes',
              expression: 'true',
              effect: 'REQUIRE_APPROVAL',
              message: 'two reviewers',
              count: 2,
            },
            {
              name: 'no-huge',
              expression: 'plan.contentBytes > 100000',
              effect: 'DENY',
              message: 'too big',
            },
          ],
        },
      },
    ),
  );
  const generation = await world.acquire(agent, 'policed', 600);
  const plan = await world.submitOk(agent, 'policed', generation, 'replicas: 2\n', {
    title: 'hotfix replicas',
  });
  const page = await signIn(reviewer);
  await openFromQueue(page, plan.id);
  const warning = page.locator('#plan-policies .policy-warn');
  await expect(warning.textContent()).resolves.toContain('hotfix: a hotfix: read twice');
  const color = await warning.evaluate(
    (node) =>
      (
        globalThis as unknown as { getComputedStyle(n: unknown): { backgroundColor: string } }
      ).getComputedStyle(node).backgroundColor,
  );
  expect(color).toBe('rgb(255, 243, 205)');
  await expect(page.locator('#plan-policies .policy-approval').textContent()).resolves.toContain(
    'two-eyes: two reviewers — still missing 2 from any approver',
  );
  await expect(page.locator('#plan-policies .policy-passed').textContent()).resolves.toBe(
    '1 passed',
  );
  await page.screenshot({ ...shot('policies'), fullPage: true });
}, 90_000);

// proves: R8
test('a newer plan published by another agent while a plan is on screen turns it OBSOLETE and disables approve, saying why', async () => {
  const reviewer = await world.issue('olga', 'REVIEWER');
  const slow = await world.issue('slow-agent', 'AGENT');
  const fast = await world.issue('fast-agent', 'AGENT');
  await world.createEnvironment('race', 'MONOTONIC');
  const old = await world.acquire(slow, 'race', 5);
  const stalePlan = await world.submitOk(slow, 'race', old, 'replicas: 2\n', {
    title: 'slow idea',
  });

  const page = await signIn(reviewer);
  await openFromQueue(page, stalePlan.id);
  expect(await page.locator('#approve').isEnabled()).toBe(true);

  world.advance(6);
  const newer = await world.acquire(fast, 'race', 600);
  const fresh = await world.submitOk(fast, 'race', newer, 'replicas: 6\n', { title: 'fast idea' });
  ok(await world.approve(ADMIN_TOKEN, fresh.id));
  expect((await world.plan(stalePlan.id))?.status).toBe('OBSOLETE');

  await page.locator('#plan-status', { hasText: 'OBSOLETE' }).waitFor({ timeout: 30_000 });
  expect(await page.locator('#approve').isDisabled()).toBe(true);
  expect(await page.locator('#reject-open').isDisabled()).toBe(true);
  await expect(page.locator('#plan-reason').textContent()).resolves.toContain('OBSOLETE');

  // The slow agent resumes with its old generation: turned away, drawn below the fence.
  expect(codeOf(await world.submit(slow, 'race', old, 'replicas: 1\n'))).toBe('STALE_GENERATION');
  const race = page.locator('section[data-env="race"]');
  await race.scrollIntoViewIfNeeded();
  // The stale point sits below the fence line's top (its highest level, generation 2).
  // Measured in one step in the page: a refresh redraws the chart.
  await page.waitForFunction(
    () => {
      const d = (globalThis as any).document;
      const chart = d.querySelector('section[data-env="race"] .timeline svg');
      if (!chart) return false;
      const marks: any[] = [...chart.querySelectorAll('.rejection')];
      const cross = marks.find((m) => m.textContent.includes('STALE_GENERATION'));
      const fence = chart.querySelector('.fence-line');
      if (!cross || !fence) return false;
      const c = cross.getBoundingClientRect();
      return c.y + c.height / 2 > fence.getBoundingClientRect().y + 2;
    },
    undefined,
    { timeout: 30_000 },
  );
  await race.screenshot({ ...shot('timeline') });
}, 90_000);

test('hostile text in titles, content, reasons and instance labels renders as text', async () => {
  const payload = '<img src=x onerror=alert(1)><script>alert(2)</script>';
  const agent = await world.issue('mallory-agent', 'AGENT');
  await world.createEnvironment('hostile', 'MONOTONIC');
  // Principal names are validated names: a payload there never gets in.
  expect(
    codeOf(
      await world.gql(
        ADMIN_TOKEN,
        'mutation($n: String!) { issueToken(name: $n, role: VIEWER) { token } }',
        { n: payload },
      ),
    ),
  ).toBe('BAD_USER_INPUT');
  const lease = ok(await world.acquireRaw(agent, 'hostile', 600, payload)).acquireLease;
  expect(lease.holder).toBe(`mallory-agent/${payload}`);
  const rejected = await world.submitOk(agent, 'hostile', lease.generation, `${payload}\n`, {
    title: payload,
  });
  ok(await world.reject(ADMIN_TOKEN, rejected.id, payload));
  const open = await world.submitOk(agent, 'hostile', lease.generation, `line\n${payload}\n`, {
    title: payload,
  });
  ok(
    await world.gql(
      ADMIN_TOKEN,
      'mutation($e: String!, $r: String!) { freezeEnvironment(environment: $e, reason: $r) { name } }',
      { e: 'hostile', r: payload },
    ),
  );

  const page = await signIn(ADMIN_TOKEN);
  const card = page.locator('section[data-env="hostile"]');
  await card.scrollIntoViewIfNeeded();
  await card.locator('.lease', { hasText: payload }).waitFor();
  await card.locator('.deploy .freeze', { hasText: payload }).waitFor();
  await openFromQueue(page, open.id);
  await expect(page.locator('#plan-title').textContent()).resolves.toBe(payload);
  await expect(page.locator('#plan-diff .line.add').allTextContents()).resolves.toContain(
    `+ ${payload}`,
  );
  await expect(page.locator('#plan-freeze').textContent()).resolves.toContain(payload);
  expect(await page.locator('#approve').isDisabled()).toBe(true);
  expect(await page.locator('#break-glass-open').isVisible()).toBe(true);
  await card.locator(`.open-plan[data-plan="${rejected.id}"]`).click();
  await page.locator('#plan-reason', { hasText: payload }).waitFor();

  const injected = await page.evaluate(() => {
    const d = (globalThis as any).document;
    return { img: d.querySelectorAll('img').length, scripts: d.querySelectorAll('script').length };
  });
  // Exactly the page's own scripts: the diff library and the console's entry module.
  const html = await (await fetch(app.url)).text();
  expect(html.match(/<script\b/g)).toHaveLength(2);
  expect(injected).toEqual({ img: 0, scripts: 2 });
}, 90_000);

test('a VIEWER sees no action buttons, and a forged approval from the page is FORBIDDEN', async () => {
  const viewer = await world.issue('vera', 'VIEWER');
  const agent = await world.issue('viewer-agent', 'AGENT');
  await world.createEnvironment('viewed', 'MONOTONIC');
  const generation = await world.acquire(agent, 'viewed', 600);
  const plan = await world.submitOk(agent, 'viewed', generation, 'replicas: 1\n', {
    title: 'look only',
  });

  const page = await signIn(viewer);
  expect(await page.locator('#queue').isHidden()).toBe(true);
  const card = page.locator('section[data-env="viewed"]');
  await card.scrollIntoViewIfNeeded();
  await card.locator(`.open-plan[data-plan="${plan.id}"]`).click();
  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  expect(await page.locator('#plan-actions').isHidden()).toBe(true);
  for (const name of ['Approve', 'Reject…', 'Break glass…', 'Reconcile']) {
    expect(await page.getByRole('button', { name }).count()).toBe(0);
  }

  // Forged: the page's own approve path (its hidden button shown and clicked), and a bare
  // request with the page's token.
  await page.evaluate(() => {
    const d = (globalThis as any).document;
    d.getElementById('plan-actions').hidden = false;
    d.getElementById('approve').hidden = false;
    d.getElementById('approve').disabled = false;
    d.getElementById('approve').click();
  });
  await page.locator('#plan-notice', { hasText: 'FORBIDDEN' }).waitFor();
  const code = await page.evaluate(async (id) => {
    const response = await fetch('/graphql', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${(globalThis as any).sessionStorage.getItem('planfence.token')}`,
      },
      body: JSON.stringify({
        query: 'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
        variables: { id },
      }),
    });
    const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
    return body.errors[0].extensions.code;
  }, plan.id);
  expect(code).toBe('FORBIDDEN');
  expect((await world.plan(plan.id))?.status).toBe('PROPOSED');
}, 90_000);

// proves: R20
test('the deployment panel shows an UNKNOWN deployment and a reviewer reconciles it; readable on a phone', async () => {
  const deployer = await issue('dora', 'DEPLOYER');
  const reviewer = await world.issue('rene', 'REVIEWER');
  const agent = await world.issue('deploy-agent', 'AGENT');
  await world.createEnvironment('shipping', 'MONOTONIC', false);
  const generation = await world.acquire(agent, 'shipping', 600);
  const plan = await world.submitOk(agent, 'shipping', generation, 'replicas: 2\n', {
    title: 'ship it',
  });
  const started = ok(
    await world.gql<{ startDeployment: { id: string } }>(
      deployer,
      'mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { id status } }',
      {
        input: {
          environment: 'shipping',
          planId: plan.id,
          idempotencyKey: 'ship-1',
          heartbeatSeconds: 5,
        },
      },
    ),
  ).startDeployment;

  const page = await signIn(reviewer);
  const card = page.locator('section[data-env="shipping"]');
  await card.scrollIntoViewIfNeeded();
  await card.locator('.deployment', { hasText: started.id }).waitFor();
  await expect(card.locator('.dstatus').textContent()).resolves.toBe('IN_PROGRESS');

  // The heartbeat lapses; a second start is refused and the page hears of it.
  world.advance(10);
  const again = await world.gql(
    deployer,
    'mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { id } }',
    { input: { environment: 'shipping', planId: plan.id, idempotencyKey: 'ship-2' } },
  );
  expect(codeOf(again)).toBe('DEPLOYMENT_ACTIVE');
  await card.locator('.dstatus', { hasText: 'UNKNOWN' }).waitFor({ timeout: 30_000 });
  await card.locator('.heartbeat', { hasText: 'lapsed' }).waitFor();
  await card.locator('.deploy').screenshot({ ...shot('deployment') });

  await card.locator('.reconcile select').selectOption('FAILED');
  await card.locator('.reconcile input').fill('checked the cluster: not applied');
  await card.locator('.reconcile button').click();
  await card
    .locator('.deploy', { hasText: 'no deployment in flight' })
    .waitFor({ timeout: 30_000 });
  const deployment = await new Deployments(world).get(started.id);
  expect(deployment).toMatchObject({ status: 'FAILED', reconciledBy: 'rene' });

  // Phone width: nothing wider than the screen.
  const phone = await signIn(reviewer, 390, 844);
  const overflow = await phone.evaluate(() => {
    const d = (globalThis as any).document.documentElement;
    return d.scrollWidth - d.clientWidth;
  });
  expect(overflow).toBeLessThanOrEqual(0);
  await phone.screenshot({ ...shot('phone') });
}, 90_000);

test('the console assets are same-origin and the diff library is served by the app', async () => {
  for (const path of ['/js/main.js', '/js/plan-view.js', '/vendor/diff.min.js']) {
    const response = await fetch(`${app.url}${path}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/javascript');
  }
  const html = await (await fetch(app.url)).text();
  expect(html).not.toMatch(/<script>|\son[a-z]+=|https?:\/\//);
  expect(html).toContain('<script type="module" src="/js/main.js"></script>');
});

test('only the listed console modules are served: no other file and no path out of public/js', async () => {
  for (const path of [
    '/js/nope.js',
    '/js/..%2Fdashboard.css',
    '/js/..%2F..%2Fpackage.json',
    '/js/%2E%2E%2Findex.html',
    '/js/',
    '/dashboard.js',
    '/console.js',
  ]) {
    const response = await fetch(`${app.url}${path}`);
    expect([path, response.status]).toEqual([path, 404]);
    expect(await response.text()).not.toContain('"name": "planfence"');
  }
  const module = await fetch(`${app.url}/js/api.js`);
  expect(module.headers.get('content-security-policy')).toContain("script-src 'self'");
  expect(module.headers.get('x-content-type-options')).toBe('nosniff');
});
