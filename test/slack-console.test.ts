/**
 * The console's part of linking a Slack user (R46): the one-time link `/planfence link`
 * answered, opened in a browser signed in to the console (here with a pasted token; the
 * people's sign-in returns to the same address), offers the link and binds it only once the
 * person confirms.
 */
import type { Browser } from 'playwright-core';
import { ManualClock } from '../src/common/clock.js';
import { startApp, type TestApp } from './support/app.js';
import { launchChromium } from './support/browser.js';
import { sendToService, signedForm, SlackApiServer, slackConfigFile } from './support/slack-api.js';
import { until } from './support/until.js';
import { ok, World } from './support/world.js';

const SECRET = 'slack-console-signing-secret';
let slack: SlackApiServer;
let app: TestApp;
let w: World;
let browser: Browser;

beforeAll(async () => {
  slack = new SlackApiServer();
  await slack.start();
  const config = slackConfigFile(slack, SECRET);
  app = await startApp({ PLANFENCE_SLACK_CONFIG: config }, new ManualClock(Date.now()));
  w = new World(app);
  ({ browser } = await launchChromium());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await slack?.stop();
});

/** `/planfence link` as `user`: the link the service answered that user alone. */
async function linkFor(user: string): Promise<string> {
  const before = slack.ephemeralTo(user).length;
  const answer = await sendToService(
    app.url,
    '/slack/commands',
    signedForm(SECRET, {
      command: '/planfence',
      text: 'link',
      team_id: 'TCONSOLE',
      user_id: user,
      channel_id: 'C00000001',
      // Slack gives every command its own trigger: two links asked within one second are
      // two requests, not a replay of one.
      trigger_id: `trigger-${Math.random()}`,
    }),
  );
  expect(answer.status).toBe(200);
  const text = await until('the link', () => slack.ephemeralTo(user)[before]);
  return /<([^|>]+)\|/.exec(text)![1];
}

// proves: R46
test('the link opened in the console, signed in, binds the Slack user once the person confirms; cancelling binds nothing', async () => {
  const reviewer = await w.issue('dana', 'REVIEWER');
  const links = async () =>
    ok(await w.gql(reviewer, '{ whoami { slackLinks { teamId userId } } }')).whoami.slackLinks;

  const cancelled = new URL(await linkFor('UDANA'));
  const page = await browser.newPage();
  await page.goto(`${app.url}${cancelled.pathname}${cancelled.search}`);
  await page.fill('#token', reviewer);
  await page.click('button[type=submit]');
  await page.locator('#slack-link', { hasText: 'dana' }).waitFor();
  await page.click('.slack-link-cancel');
  await page.locator('#slack-link').waitFor({ state: 'detached' });
  expect(new URL(page.url()).searchParams.has('slack-link')).toBe(false);
  expect(await links()).toEqual([]);

  const link = new URL(await linkFor('UDANA'));
  await page.goto(`${app.url}${link.pathname}${link.search}`);
  await page.locator('#slack-link').waitFor();
  expect(await links()).toEqual([]); // nothing before the person confirms
  await page.click('.slack-link-confirm');
  await page.locator('#slack-link', { hasText: 'Linked: Slack user UDANA' }).waitFor();
  expect(new URL(page.url()).searchParams.has('slack-link')).toBe(false);
  expect(await links()).toEqual([{ teamId: 'TCONSOLE', userId: 'UDANA' }]);

  // The same link again: used up, said so, nothing else bound.
  await page.goto(`${app.url}${link.pathname}${link.search}`);
  await page.locator('#slack-link').waitFor();
  await page.click('.slack-link-confirm');
  await page.locator('#slack-link', { hasText: 'Not linked' }).waitFor();
  expect(await links()).toEqual([{ teamId: 'TCONSOLE', userId: 'UDANA' }]);
}, 120_000);
