/**
 * Linking a Slack user through the people's sign-in (R46 with R40): `/planfence link`
 * answers the Slack user alone with a one-time link; opened in a browser that is not signed
 * in, the console sends the person to the organisation's provider (its own login form),
 * back to the link, and binds the Slack user to that person once they confirm. The person's
 * click in Slack then approves as them: the approval and its audit event name the person
 * and say `via: slack` (R43, R47).
 */
import type { Browser } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { ADMIN_TOKEN, ok } from './support/app.js';
import { launchChromium } from './support/browser.js';
import { type SignInWorld, startSignInWorld } from './support/sign-in.js';
import {
  approveValue,
  hasButtons,
  sendToService,
  signedForm,
  SlackApiServer,
  slackConfigFile,
} from './support/slack-api.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

const SECRET = 'slack-sign-in-signing-secret';
const TEAM = 'TSIGNIN';
let slack: SlackApiServer;
let world: SignInWorld;
let browser: Browser;

beforeAll(async () => {
  slack = new SlackApiServer();
  await slack.start();
  const config = slackConfigFile(slack, SECRET);
  world = await startSignInWorld({
    env: { PLANFENCE_SLACK_CONFIG: config },
    clock: new ManualClock(Date.now()),
  });
  ({ browser } = await launchChromium());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await world?.close();
  await slack?.stop();
});

function slackRequest(
  path: '/slack/interactions' | '/slack/commands',
  fields: Record<string, string>,
) {
  return sendToService(world.app.url, path, signedForm(SECRET, fields));
}

// proves: R46, R47
test('a Slack user is linked to the person who signed in through the provider, and their click approves as that person, via slack', async () => {
  // `/planfence link` as the Slack user: the link, to that user alone.
  expect(
    (
      await slackRequest('/slack/commands', {
        command: '/planfence',
        text: 'link',
        team_id: TEAM,
        user_id: 'URITA',
        channel_id: 'C00000001',
      })
    ).status,
  ).toBe(200);
  const text = await until('the link', () => slack.ephemeralTo('URITA')[0]);
  const link = new URL(/<([^|>]+)\|/.exec(text)![1]);

  // Opened in a browser signed in to nothing: the provider's own form, then back to the link.
  const page = await browser.newPage();
  await page.goto(`${world.app.url}${link.pathname}${link.search}`);
  await page.locator('#sign-in-providers a', { hasText: 'Sign in with Example SSO' }).click();
  await page.waitForURL((url) => url.origin === world.provider.issuer);
  await page.fill('input[name=login]', 'u-rita');
  await page.fill('input[name=password]', 'any password');
  await page.locator('button[type=submit]', { hasText: 'Sign-in' }).click();
  await page.waitForURL((url) => url.origin === world.app.url);
  await page.locator('#who', { hasText: 'Rita Reviewer' }).waitFor();
  await page.locator('#slack-link').waitFor();
  await page.click('.slack-link-confirm');
  await page.locator('#slack-link', { hasText: 'Linked: Slack user URITA' }).waitFor();

  const principals = ok(
    await world.app.gql(ADMIN_TOKEN, '{ principals { name slackLinks { teamId userId } } }'),
  ).principals as { name: string; slackLinks: { teamId: string; userId: string }[] }[];
  expect(principals.find((p) => p.name === 'rita@example.com')?.slackLinks).toEqual([
    { teamId: TEAM, userId: 'URITA' },
  ]);

  // A plan awaiting review: its message, and Rita's click on Approve.
  const w = new World(world.app);
  await w.createEnvironment('slack-prod', 'MONOTONIC');
  const agent = await w.issue('slack-agent', 'AGENT');
  const generation = await w.acquire(agent, 'slack-prod', 600);
  const plan = await w.submitOk(agent, 'slack-prod', generation, 'replicas: 4\n', {
    title: 'scale',
  });
  const message = await until('the message', () =>
    [...slack.messages.values()].find((m) => JSON.stringify(m.blocks).includes(`plan ${plan.id})`)),
  );
  const payload = {
    type: 'block_actions',
    team: { id: TEAM },
    user: { id: 'URITA', team_id: TEAM },
    channel: { id: 'C00000001' },
    container: { type: 'message', channel_id: 'C00000001' },
    trigger_id: 'trigger-sign-in',
    actions: [
      {
        action_id: 'planfence_approve',
        block_id: 'planfence_actions',
        value: approveValue(message.blocks),
        type: 'button',
      },
    ],
  };
  expect(
    (await slackRequest('/slack/interactions', { payload: JSON.stringify(payload) })).status,
  ).toBe(200);
  await until('published', async () => (await w.plan(plan.id))?.status === 'PUBLISHED');
  await until('the message without buttons', () => !hasButtons(message.blocks));

  const read = ok(
    await world.app.gql(
      ADMIN_TOKEN,
      'query($id: ID!) { plan(id: $id) { approvals { approver via person { subject email } } } }',
      { id: plan.id },
    ),
  ).plan;
  expect(read.approvals).toEqual([
    {
      approver: 'rita@example.com',
      via: 'slack',
      person: { subject: 'u-rita', email: 'rita@example.com' },
    },
  ]);
  const events = ok(
    await world.app.gql<{
      auditEvents: { action: string; via: string | null; detail: string | null }[];
    }>(ADMIN_TOKEN, '{ auditEvents(environment: "slack-prod", first: 50) { action via detail } }'),
  ).auditEvents;
  const approval = events.find((e) => e.action === 'APPROVE_PLAN')!;
  expect(approval.via).toBe('slack');
  expect(approval.detail).toContain('Rita Reviewer <rita@example.com> (subject u-rita at');
}, 120_000);
