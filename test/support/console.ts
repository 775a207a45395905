/**
 * What every console suite sets up: the real app on a manual clock that starts now, a
 * World to drive it, one Chromium (its pages stay open until it closes: the single-process
 * Chromium that npm installs does not survive a page being closed), and pages signed in
 * with a token. Every page is watched for dialogs (an XSS payload that ran would open one):
 * after each test there must have been none.
 */
import type { Browser, Page } from 'playwright-core';
import { ManualClock } from '../../src/common/clock.js';
import { startApp, type TestApp } from './app.js';
import { launchChromium } from './browser.js';
import { World } from './world.js';

export interface ConsoleSuite {
  app: TestApp;
  world: World;
  browser: Browser;
  /** Messages of the dialogs any page opened. */
  dialogs: string[];
  /**
   * A new page signed in with `token`, once its subscription is live and the principal is
   * shown; `watch` sees the page before it loads.
   */
  signIn(
    token: string,
    viewport?: { width: number; height: number },
    watch?: (page: Page) => void,
  ): Promise<Page>;
}

/** Registers the suite's hooks; the fields are set once its `beforeAll` ran. */
export function consoleSuite(): ConsoleSuite {
  const suite = { dialogs: [] as string[] } as ConsoleSuite;
  suite.signIn = async (token, viewport = { width: 1280, height: 800 }, watch) => {
    const page = await suite.browser.newPage({ viewport });
    page.on('dialog', (dialog) => {
      suite.dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    watch?.(page);
    await page.goto(suite.app.url);
    await page.fill('#token', token);
    await page.click('button[type=submit]');
    await page.locator('#status.live').waitFor();
    await page.locator('#who', { hasText: '·' }).waitFor();
    return page;
  };
  beforeAll(async () => {
    suite.app = await startApp({}, new ManualClock(Date.now()));
    suite.world = new World(suite.app);
    ({ browser: suite.browser } = await launchChromium());
  }, 120_000);
  afterAll(async () => {
    await suite.browser?.close();
    await suite.app?.close();
  });
  afterEach(() => {
    expect(suite.dialogs).toEqual([]);
  });
  return suite;
}
