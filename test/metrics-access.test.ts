/**
 * /metrics names every environment and its fence. Two ways to close it, each checked at
 * start: PLANFENCE_METRICS_TOKEN (a bearer token required to scrape) and
 * PLANFENCE_METRICS_LISTEN (served only on an address of its own; the main port answers 404).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { MetricsListener } from '../src/metrics/metrics-listener.js';
import { distFile, freePort } from './fault/service.js';
import { ADMIN_TOKEN, scratchDir, startApp, type TestApp } from './support/app.js';
import { World } from './support/world.js';

const TOKEN = 'metrics-token-abcdef0123456789';

/** The address the metrics server bound (port 0 asked: any free one). */
function metricsUrl(app: TestApp): string {
  const address = app.get(MetricsListener).address!;
  return `http://127.0.0.1:${address.port}/metrics`;
}

test.each([
  ['PLANFENCE_METRICS_LISTEN', '9464'],
  ['PLANFENCE_METRICS_LISTEN', 'localhost'],
  ['PLANFENCE_METRICS_LISTEN', '127.0.0.1:99999'],
  ['PLANFENCE_METRICS_LISTEN', 'http://127.0.0.1:9464'],
  ['PLANFENCE_METRICS_TOKEN', 'short'],
])('a bad %s (%s) stops the start, naming it', (variable, value) => {
  expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
  expect(() => loadConfig({ [variable]: value })).toThrow(variable);
});

test('the address forms PLANFENCE_METRICS_LISTEN takes', () => {
  expect(loadConfig({}).limits.metricsListen).toBeNull();
  expect(loadConfig({ PLANFENCE_METRICS_LISTEN: '10.0.0.5:9464' }).limits.metricsListen).toEqual({
    host: '10.0.0.5',
    port: 9464,
  });
  expect(loadConfig({ PLANFENCE_METRICS_LISTEN: '[::1]:9464' }).limits.metricsListen).toEqual({
    host: '::1',
    port: 9464,
  });
});

describe('PLANFENCE_METRICS_TOKEN', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ PLANFENCE_METRICS_TOKEN: TOKEN });
    await new World(app).createEnvironment('secret-prod', 'MONOTONIC');
  });
  afterAll(() => app.close());

  test('without the token, or with a GraphQL token, nothing of an environment is shown', async () => {
    for (const authorization of [
      undefined,
      'Bearer wrong-token-0123456789',
      `Bearer ${ADMIN_TOKEN}`,
    ]) {
      const response = await fetch(`${app.url}/metrics`, {
        headers: authorization ? { authorization } : {},
      });
      expect(response.status).toBe(401);
      const text = await response.text();
      expect(text).not.toContain('secret-prod');
      expect(text).not.toContain('planfence_');
    }
    const scraped = await fetch(`${app.url}/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('environment="secret-prod"');
  });
});

describe('PLANFENCE_METRICS_LISTEN', () => {
  let open: TestApp;
  let closed: TestApp;
  beforeAll(async () => {
    open = await startApp({ PLANFENCE_METRICS_LISTEN: '127.0.0.1:0' });
    closed = await startApp({
      PLANFENCE_METRICS_LISTEN: '127.0.0.1:0',
      PLANFENCE_METRICS_TOKEN: TOKEN,
    });
    for (const app of [open, closed])
      await new World(app).createEnvironment('secret-prod', 'MONOTONIC');
  });
  afterAll(async () => {
    await open.close();
    await closed.close();
  });

  test('the main port answers 404 for /metrics, with no metric; the metrics address serves them', async () => {
    const main = await fetch(`${open.url}/metrics`);
    expect(main.status).toBe(404);
    expect(await main.text()).not.toContain('secret-prod');
    const own = await fetch(metricsUrl(open));
    expect(own.status).toBe(200);
    expect(await own.text()).toContain('environment="secret-prod"');
    // Nothing else is served there.
    const other = new URL(metricsUrl(open));
    other.pathname = '/graphql';
    expect((await fetch(other)).status).toBe(404);
    expect((await fetch(metricsUrl(open), { method: 'POST' })).status).toBe(405);
  });

  test('with the token set as well, the metrics address requires it', async () => {
    expect((await fetch(`${closed.url}/metrics`)).status).toBe(404);
    const anonymous = await fetch(metricsUrl(closed));
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).not.toContain('secret-prod');
    const scraped = await fetch(metricsUrl(closed), {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('environment="secret-prod"');
  });

  test('an address that cannot be bound stops the start (exit 1), naming the variable', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const dir = scratchDir();
    try {
      const child = spawn(process.execPath, [distFile('src/main.js')], {
        env: {
          ...process.env,
          PORT: String(await freePort()),
          DATABASE_URL: `sqlite:${join(dir.path, 'planfence.db')}`,
          PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
          PLANFENCE_METRICS_LISTEN: `127.0.0.1:${port}`,
          LOG_LEVEL: 'error',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const code = await new Promise((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      expect(output).toContain(
        `PLANFENCE_METRICS_LISTEN: cannot listen on 127.0.0.1:${port}: EADDRINUSE`,
      );
    } finally {
      taken.close();
      dir.cleanup();
    }
  }, 60_000);
});
