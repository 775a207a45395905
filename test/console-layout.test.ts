/**
 * The console's layout and safe defaults in a real browser against the real app over HTTP:
 * rejections grouped by kind with whole codes on a wide screen, names on one line, a
 * timeline with a time axis, FROZEN badges on the card, in the queue and on the plan view,
 * the facts a reviewer approves against, a publish announced as a success, a reconcile
 * form only for an UNKNOWN deployment and with no default outcome, and a phone-width page
 * where every panel fits and what is wider scrolls inside its own box. Screenshots go to
 * test-output/ (docs/pictures/ with PLANFENCE_DOCS_PICTURES=1, `npm run docs:pictures`).
 */
import type { Locator, Page } from 'playwright-core';
import { consoleSuite } from './support/console.js';
import { ADMIN_TOKEN } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';
import { picture, SHOT } from './support/pictures.js';
import { Deployments } from './support/deployers.js';

const shot = (name: string) => ({ path: picture(`console-${name}`), ...SHOT });

const suite = consoleSuite();
let world: World;
beforeAll(() => ({ world } = suite));

const signIn = (token: string, width: number, height: number): Promise<Page> =>
  suite.signIn(token, { width, height });

interface Box {
  left: number;
  right: number;
  top: number;
  bottom: number;
  width: number;
  height: number;
  scrollWidth: number;
  clientWidth: number;
}

/** An element's box on the page and whether its content is wider than it. */
function box(locator: Locator): Promise<Box> {
  return locator.evaluate((node: any) => {
    const r = node.getBoundingClientRect();
    return {
      left: r.left,
      right: r.right,
      top: r.top,
      bottom: r.bottom,
      width: r.width,
      height: r.height,
      scrollWidth: node.scrollWidth,
      clientWidth: node.clientWidth,
    };
  });
}

/** A computed style property of an element. */
function style(locator: Locator, property: string): Promise<string> {
  return locator.evaluate(
    (node, name) => (globalThis as any).getComputedStyle(node).getPropertyValue(name),
    property,
  );
}

const START_DEPLOYMENT =
  'mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { id status } }';

test('at 1440 px rejections are grouped by kind with whole codes, names stay on one line, the timeline has a time axis, and reconcile waits for UNKNOWN with no default outcome', async () => {
  const longName = 'agent-with-a-rather-long-principal-name-that-does-not-fit-a-row';
  const slow = await world.issue(longName, 'AGENT');
  const fast = await world.issue('fast-agent', 'AGENT');
  const reviewer = await world.issue('wide-reviewer', 'REVIEWER');
  const deployer = await world.issue('wide-deployer', 'DEPLOYER');
  await world.createEnvironment('turned', 'MONOTONIC');

  // A stale agent, a reviewer asking for break-glass, a second deployment: three kinds.
  const old = await world.acquire(slow, 'turned', 5);
  const first = await world.submitOk(slow, 'turned', old, 'replicas: 1\n', { title: 'slow' });
  world.advance(6);
  const fresh = await world.acquire(fast, 'turned', 600);
  const second = await world.submitOk(fast, 'turned', fresh, 'replicas: 2\n', { title: 'fast' });
  ok(await world.approve(ADMIN_TOKEN, second.id));
  expect(codeOf(await world.submit(slow, 'turned', old, 'replicas: 0\n'))).toBe('STALE_GENERATION');
  expect(
    codeOf(await world.approve(reviewer, first.id, { breakGlassReason: 'not mine to break' })),
  ).toBe('FORBIDDEN');
  const started = ok(
    await world.gql<{ startDeployment: { id: string; status: string } }>(
      deployer,
      START_DEPLOYMENT,
      {
        input: {
          environment: 'turned',
          planId: second.id,
          idempotencyKey: 'turned-1',
          heartbeatSeconds: 5,
        },
      },
    ),
  ).startDeployment;
  expect(started.status).toBe('IN_PROGRESS');
  expect(
    codeOf(
      await world.gql(deployer, START_DEPLOYMENT, {
        input: { environment: 'turned', planId: second.id, idempotencyKey: 'turned-2' },
      }),
    ),
  ).toBe('DEPLOYMENT_ACTIVE');

  const page = await signIn(reviewer, 1440, 900);
  const card = page.locator('section[data-env="turned"]');
  await card.scrollIntoViewIfNeeded();
  const away = card.locator('.turned-away');
  await away.locator('.rejection-group[data-kind="deployment"]').waitFor({ timeout: 30_000 });

  // Grouped by kind, each code whole and inside the card.
  await expect(
    away.locator('.rejection-group[data-kind="stale"] .code').allTextContents(),
  ).resolves.toEqual(['STALE_GENERATION']);
  await expect(
    away.locator('.rejection-group[data-kind="access"] .code').allTextContents(),
  ).resolves.toEqual(['FORBIDDEN']);
  await expect(
    away.locator('.rejection-group[data-kind="deployment"] .code').allTextContents(),
  ).resolves.toEqual(['DEPLOYMENT_ACTIVE']);
  const cardBox = await box(card);
  expect(cardBox.scrollWidth).toBeLessThanOrEqual(cardBox.clientWidth);
  for (const cell of await away.locator('td:has(.code)').all()) {
    const outer = await box(cell);
    expect(outer.scrollWidth).toBeLessThanOrEqual(outer.clientWidth);
    const code = await box(cell.locator('.code'));
    expect(code.left).toBeGreaterThanOrEqual(outer.left);
    expect(code.right).toBeLessThanOrEqual(Math.min(outer.right, cardBox.right));
  }

  // The long submitter name: one line, cut with an ellipsis, whole in its title.
  const submitter = card.locator(`.plans tr:has(button[data-plan="${first.id}"]) .submitter .name`);
  await expect(submitter.getAttribute('title')).resolves.toBe(longName);
  await expect(style(submitter, 'white-space')).resolves.toBe('nowrap');
  await expect(style(submitter, 'text-overflow')).resolves.toBe('ellipsis');
  const name = await box(submitter);
  expect(name.scrollWidth).toBeGreaterThan(name.clientWidth);
  const lineHeight = parseFloat(await style(submitter, 'font-size')) * 2;
  expect(name.height).toBeLessThan(lineHeight);

  // The timeline's time axis: labelled ticks under the chart, inside it.
  const chart = card.locator('.timeline svg');
  await chart.waitFor();
  const labels = chart.locator('.time-label');
  expect(await labels.count()).toBeGreaterThanOrEqual(2);
  for (const text of await labels.allTextContents()) expect(text).toMatch(/\d{1,2}:\d{2}:\d{2}/);
  const chartBox = await box(chart);
  for (const label of await labels.all()) {
    const at = await box(label);
    expect(at.left).toBeGreaterThanOrEqual(chartBox.left);
    expect(at.right).toBeLessThanOrEqual(chartBox.right);
    expect(at.bottom).toBeLessThanOrEqual(chartBox.bottom);
  }

  // A live IN_PROGRESS deployment is not offered for reconciling.
  await card.locator('.dstatus', { hasText: 'IN_PROGRESS' }).waitFor();
  expect(await card.locator('.reconcile').count()).toBe(0);
  await card.locator('.reconcile-later').waitFor();
  await card.screenshot({ ...shot('card') });

  // Once UNKNOWN it is, with no outcome chosen and the button off until one is.
  world.advance(10);
  expect(
    codeOf(
      await world.gql(deployer, START_DEPLOYMENT, {
        input: { environment: 'turned', planId: second.id, idempotencyKey: 'turned-3' },
      }),
    ),
  ).toBe('DEPLOYMENT_ACTIVE');
  await card.locator('.dstatus', { hasText: 'UNKNOWN' }).waitFor({ timeout: 30_000 });
  const form = card.locator('.reconcile');
  await expect(form.locator('select').inputValue()).resolves.toBe('');
  expect(await form.locator('button').isDisabled()).toBe(true);
  await form.locator('input').fill('checked: applied');
  expect(await form.locator('button').isDisabled()).toBe(true);
  await form.locator('select').selectOption('SUCCEEDED');
  expect(await form.locator('button').isEnabled()).toBe(true);
  await form.locator('button').click();
  await card
    .locator('.deploy', { hasText: 'no deployment in flight' })
    .waitFor({ timeout: 30_000 });
  const reconciled = await new Deployments(world).get(started.id);
  expect(reconciled).toMatchObject({ status: 'SUCCEEDED', reconciledBy: 'wide-reviewer' });
}, 90_000);

test('a frozen environment is badged FROZEN on its card, in the queue and on the plan view; the plan view names the pinned hash, the fence and the lease; a publish reads as a success', async () => {
  const agent = await world.issue('badge-agent', 'AGENT');
  const reviewer = await world.issue('badge-reviewer', 'REVIEWER');
  await world.createEnvironment('cold', 'MONOTONIC');
  await world.createEnvironment('warm', 'MONOTONIC');
  const coldGeneration = await world.acquire(agent, 'cold', 600);
  const coldPlan = await world.submitOk(agent, 'cold', coldGeneration, 'replicas: 1\n', {
    title: 'while frozen',
  });
  const warmGeneration = await world.acquire(agent, 'warm', 600);
  const warmPlan = await world.submitOk(agent, 'warm', warmGeneration, 'replicas: 3\n', {
    title: 'while open',
  });
  ok(
    await world.gql(
      ADMIN_TOKEN,
      'mutation($e: String!, $r: String!) { freezeEnvironment(environment: $e, reason: $r) { name } }',
      { e: 'cold', r: 'release freeze' },
    ),
  );
  const page = await signIn(reviewer, 1280, 800);
  const coldRow = page.locator(`#queue-table tr[data-plan="${coldPlan.id}"]`);
  const warmRow = page.locator(`#queue-table tr[data-plan="${warmPlan.id}"]`);
  await coldRow.locator('.badge.frozen', { hasText: 'FROZEN' }).waitFor({ timeout: 30_000 });
  await expect(coldRow.locator('button').textContent()).resolves.toBe('View (frozen)');
  await expect(warmRow.locator('button').textContent()).resolves.toBe('Review');
  expect(await warmRow.locator('.badge').count()).toBe(0);
  await page.locator('#queue').screenshot({ ...shot('queue-frozen') });

  // The card says it at the top, by its name.
  const card = page.locator('section[data-env="cold"]');
  await card.scrollIntoViewIfNeeded();
  const badge = card.locator('.summary h2 .badge.frozen');
  await badge.waitFor({ timeout: 30_000 });
  await expect(badge.getAttribute('title')).resolves.toContain('release freeze');
  expect((await box(badge)).top - (await box(card)).top).toBeLessThan(60);

  await coldRow.locator('button').click();
  await page.locator('#plan-id', { hasText: coldPlan.id }).waitFor();
  expect(await page.locator('#plan-frozen-badge').isVisible()).toBe(true);
  expect(await page.locator('#approve').isDisabled()).toBe(true);

  await warmRow.locator('button').click();
  await page.locator('#plan-id', { hasText: warmPlan.id }).waitFor();
  expect(await page.locator('#plan-frozen-badge').isHidden()).toBe(true);
  const warm = await world.environment('warm');
  await expect(page.locator('#plan-hash').textContent()).resolves.toBe(warmPlan.contentHash);
  await expect(page.locator('#plan-fence').textContent()).resolves.toContain(
    `generation ${warmGeneration} · fence ${warm.fence}`,
  );
  await expect(page.locator('#plan-lease').textContent()).resolves.toContain(
    `badge-agent · generation ${warmGeneration}`,
  );
  await page.locator('#plan-view').screenshot({ ...shot('plan-facts') });

  await page.locator('#approve').click();
  const notice = page.locator('#plan-notice');
  await notice.filter({ hasText: `Published ${warmPlan.id}` }).waitFor();
  expect(await notice.evaluate((n) => [...n.classList].sort())).toEqual(['notice', 'success']);
  await expect(style(notice, 'background-color')).resolves.toBe('rgb(230, 246, 234)');
  await expect(style(notice, 'color')).resolves.toBe('rgb(11, 90, 36)');

  // More environments in the queue than one request may name (32 root fields by
  // default): the last is frozen too, and badged.
  const many = Array.from({ length: 34 }, (_, i) => `many-${String(i).padStart(2, '0')}`);
  const manyPlans: string[] = [];
  for (const name of many) {
    await world.createEnvironment(name, 'MONOTONIC');
    const g = await world.acquire(agent, name, 600);
    manyPlans.push((await world.submitOk(agent, name, g, 'replicas: 1\n')).id);
  }
  ok(
    await world.gql(
      ADMIN_TOKEN,
      'mutation($e: String!, $r: String!) { freezeEnvironment(environment: $e, reason: $r) { name } }',
      { e: many[33], r: 'late freeze' },
    ),
  );

  // The open page hears of them and badges the last one too.
  await page
    .locator(`#queue-table tr[data-plan="${manyPlans[33]}"] .badge.frozen`)
    .waitFor({ timeout: 30_000 });
  expect(await page.locator(`#queue-table tr[data-plan="${manyPlans[0]}"] .badge`).count()).toBe(0);
  expect(await page.locator('#queue-table tr[data-frozen]').count()).toBe(2);
  for (const id of manyPlans) ok(await world.reject(ADMIN_TOKEN, id, 'cleared'));
  await page.locator(`#queue-table tr[data-plan="${manyPlans[0]}"]`).waitFor({ state: 'detached' });
}, 90_000);

test('at phone width the queue, its Review button and what is missing, the cards and the diff fit the screen; wider content scrolls in its own box with a cue', async () => {
  const agent = await world.issue('narrow-agent', 'AGENT');
  const reviewer = await world.issue('narrow-reviewer', 'REVIEWER');
  await world.createEnvironment('narrow', 'MONOTONIC');
  const generation = await world.acquire(agent, 'narrow', 600);
  const longLine = `command: ${'--flag=value '.repeat(30)}\n`;
  const plan = await world.submitOk(agent, 'narrow', generation, `replicas: 2\n${longLine}`, {
    title: 'a plan with a very long line that a phone cannot show at once',
  });

  const width = 375;
  const page = await signIn(reviewer, width, 812);
  const row = page.locator(`#queue-table tr[data-plan="${plan.id}"]`);
  await row.waitFor({ timeout: 30_000 });
  const page_ = await box(page.locator('html'));
  expect(page_.scrollWidth).toBeLessThanOrEqual(page_.clientWidth);

  const inside = (b: Box) => {
    expect(b.left).toBeGreaterThanOrEqual(0);
    expect(b.right).toBeLessThanOrEqual(width);
  };
  inside(await box(page.locator('#queue')));
  for (const queued of await page.locator('#queue-table tbody tr').all()) {
    inside(await box(queued.locator('button.open-plan')));
    inside(await box(queued.locator('.missing')));
  }
  await page.locator('#queue').screenshot({ ...shot('phone-queue') });

  const card = page.locator('section[data-env="narrow"]');
  await card.scrollIntoViewIfNeeded();
  await card.locator('.plans').waitFor({ timeout: 30_000 });
  inside(await box(card));
  for (const scroller of await card.locator('.scroll-x').all()) inside(await box(scroller));

  await row.locator('button').click();
  await page.locator('#plan-id', { hasText: plan.id }).waitFor();
  const diff = page.locator('#plan-diff');
  inside(await box(page.locator('#plan-view')));
  inside(await box(diff));
  const diffBox = await box(diff);
  expect(diffBox.scrollWidth).toBeGreaterThan(diffBox.clientWidth);
  // The cue: marked as holding more, with a shadow on its right edge.
  await page.locator('#plan-diff[data-overflow]').waitFor();
  await expect(style(diff, 'box-shadow')).resolves.not.toBe('none');
  await diff.evaluate((node: any) => {
    node.scrollLeft = node.scrollWidth;
  });
  await page.locator('#plan-diff[data-at-end]').waitFor();
  await diff.evaluate((node: any) => {
    node.scrollLeft = 0;
  });
  await page.locator('#plan-diff:not([data-at-end])').waitFor();
  const after = await box(page.locator('html'));
  expect(after.scrollWidth).toBeLessThanOrEqual(after.clientWidth);
  await page.locator('#plan-view').screenshot({ ...shot('phone-diff') });
}, 90_000);
