/**
 * The Chromium the browser tests drive: the system's (`CHROMIUM_PATH`, else
 * /usr/bin/chromium) when present, otherwise the one that arrives with `npm ci`
 * (@sparticuz/chromium, unpacked to the temp folder on first use). A fresh machine
 * therefore needs nothing beyond the README's two commands.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium as playwright } from 'playwright-core';

const SYSTEM_CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const COMMON_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Which browser was chosen, for the test's own record. */
export interface LaunchedBrowser {
  browser: Browser;
  source: 'system' | 'npm';
  executablePath: string;
}

export async function launchChromium(): Promise<LaunchedBrowser> {
  if (existsSync(SYSTEM_CHROMIUM)) {
    const browser = await playwright.launch({
      executablePath: SYSTEM_CHROMIUM,
      args: COMMON_ARGS,
      headless: true,
    });
    return { browser, source: 'system', executablePath: SYSTEM_CHROMIUM };
  }
  const { default: packaged } = await import('@sparticuz/chromium');
  const executablePath = await packaged.executablePath();
  const args = [...new Set([...packaged.args, ...COMMON_ARGS])];
  const browser = await playwright.launch({ executablePath, args, headless: true });
  return { browser, source: 'npm', executablePath };
}
