/**
 * The HTTP layer under hostile clients: slow bodies and silent connections are closed,
 * connections are capped, every response carries the security headers, /metrics can
 * demand a token, and SIGTERM ends the process even with a connection hanging.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { ADMIN_TOKEN as SERVICE_ADMIN_TOKEN, ServiceProcess } from '../fault/service.js';
import { ADMIN_TOKEN, scratchDir, startApp, type TestApp } from '../support/app.js';
import { portOf, rawConnection } from '../support/raw-http.js';

let app: TestApp;

beforeAll(async () => {
  app = await startApp({
    PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS: '1',
    PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS: '1',
    PLANFENCE_MAX_CONNECTIONS: '20',
    PLANFENCE_METRICS_TOKEN: 'metrics-token-0123456789',
  });
});
afterAll(() => app.close());

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a body that trickles in is cut off at the request timeout', async () => {
  const { socket, received, closed } = await rawConnection(app.url);
  socket.write(
    'POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"query":',
  );
  const trickle = setInterval(() => socket.write(' '), 200);
  await closed;
  clearInterval(trickle);
  expect(received()).toMatch(/^HTTP\/1\.1 408/);
  expect((await fetch(`${app.url}/health`)).status).toBe(200);
});

test('a connection that never sends its headers is closed', async () => {
  const { socket, closed } = await rawConnection(app.url);
  socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
  await closed;
  expect(socket.destroyed).toBe(true);
});

test('connections beyond PLANFENCE_MAX_CONNECTIONS are dropped, and the service serves again once they go', async () => {
  const capped = await startApp({ PLANFENCE_MAX_CONNECTIONS: '3' });
  try {
    const held = await Promise.all([1, 2, 3].map(() => rawConnection(capped.url)));
    // Let the server accept the three before the fourth knocks.
    for (const c of held) {
      c.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      while (!c.received().includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 10));
    }
    const extra = await rawConnection(capped.url);
    extra.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await extra.closed;
    expect(extra.received()).toBe('');
    for (const c of held) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
    let status = 0;
    while (status !== 200) {
      status = await fetch(`${capped.url}/health`).then(
        (r) => r.status,
        () => 0,
      );
    }
    expect(status).toBe(200);
  } finally {
    await capped.close();
  }
});

test('every response carries the security headers; the dashboard policy allows no inline script and no framing', async () => {
  const responses = await Promise.all([
    fetch(`${app.url}/`),
    fetch(`${app.url}/js/main.js`),
    fetch(`${app.url}/health`),
    fetch(`${app.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query":5}',
    }),
    fetch(`${app.url}/no-such-page`),
  ]);
  for (const response of responses) {
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
  }
  expect(responses[3].status).toBe(400);
});

test('GraphiQL is off unless PLANFENCE_GRAPHIQL=on', async () => {
  expect((await fetch(`${app.url}/graphiql`)).status).toBe(404);
});

test('/metrics with PLANFENCE_METRICS_TOKEN set answers 401 without it and the metrics with it', async () => {
  const anonymous = await fetch(`${app.url}/metrics`);
  expect(anonymous.status).toBe(401);
  expect(await anonymous.text()).not.toContain('planfence_');
  const wrong = await fetch(`${app.url}/metrics`, {
    headers: { authorization: 'Bearer metrics-token-wrong-0000' },
  });
  expect(wrong.status).toBe(401);
  const scraped = await fetch(`${app.url}/metrics`, {
    headers: { authorization: 'Bearer metrics-token-0123456789' },
  });
  expect(scraped.status).toBe(200);
  expect(await scraped.text()).toContain('planfence_authentications_total');
  // The admin's GraphQL token is not the metrics token.
  const admin = await fetch(`${app.url}/metrics`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(admin.status).toBe(401);
});

test('SIGTERM answers the request in flight, closes a hanging upload at the deadline, and the process exits', async () => {
  const dir = scratchDir();
  const service = new ServiceProcess(`${dir.path}/planfence.db`, {
    PLANFENCE_SHUTDOWN_TIMEOUT_SECONDS: '3',
    PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS: '600',
    LOG_LEVEL: 'silent',
  });
  try {
    await service.start();
    const body = JSON.stringify({ query: '{ whoami { name } }' });
    const head = (length: number) =>
      `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${SERVICE_ADMIN_TOKEN}\r\nContent-Length: ${length}\r\n\r\n`;
    // Expect: 100-continue makes the server say when it has the headers: the request has begun.
    const inFlight = await rawConnection(service.url);
    inFlight.socket.write(
      head(body.length).replace('\r\n\r\n', '\r\nExpect: 100-continue\r\n\r\n') + body.slice(0, 5),
    );
    while (!inFlight.received().includes('100 Continue'))
      await new Promise((r) => setTimeout(r, 10));
    const hanging = await rawConnection(service.url);
    hanging.socket.write(head(100_000) + '{"query":');
    // stop() sends SIGTERM and resolves when the process has exited.
    const stopped = service.stop();
    // Once the service refuses new connections it is shutting down; the upload in flight then completes.
    let refused = false;
    while (!refused) {
      refused = await fetch(`${service.url}/health`).then(
        () => false,
        () => true,
      );
    }
    inFlight.socket.write(body.slice(5));
    await Promise.all([stopped, hanging.closed, inFlight.closed]);
    expect(inFlight.received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200/);
    expect(inFlight.received()).toContain('{"data":{"whoami":{"name":"admin"}}}');
    expect(hanging.socket.destroyed).toBe(true);
    expect(service.pid === undefined || !isAlive(service.pid)).toBe(true);
  } finally {
    await service.crash();
    dir.cleanup();
  }
});

test('connections beyond PLANFENCE_MAX_CONNECTIONS_PER_IP from one address are dropped; another address is served', async () => {
  const capped = await startApp({ PLANFENCE_MAX_CONNECTIONS_PER_IP: '3' });
  try {
    const held = await Promise.all([1, 2, 3].map(() => rawConnection(capped.url)));
    for (const c of held) {
      c.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      while (!c.received().includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 10));
    }
    const extra = await rawConnection(capped.url);
    extra.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await extra.closed;
    expect(extra.received()).toBe('');

    // Another client (another loopback address) is not counted with the first.
    const other = connect({
      port: portOf(capped.url),
      host: '127.0.0.1',
      localAddress: '127.0.0.2',
    });
    let answer = '';
    other.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    await once(other, 'connect');
    other.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await once(other, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 200/);

    // Once one of the first client's connections goes, it may open another.
    held[0].socket.destroy();
    await held[0].closed;
    let status = 0;
    while (status !== 200) {
      status = await fetch(`${capped.url}/health`).then(
        (r) => r.status,
        () => 0,
      );
    }
    for (const c of held) c.socket.destroy();
  } finally {
    await capped.close();
  }
});

test('/metrics without PLANFENCE_METRICS_TOKEN is open, and the start says so in a warning', async () => {
  const warnings = async (env: Record<string, string>) => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    const started = await startApp(env, undefined, pino({ level: 'warn' }, sink));
    const status = (await fetch(`${started.url}/metrics`)).status;
    await started.close();
    return { status, lines: lines.map((l) => (JSON.parse(l) as { msg: string }).msg) };
  };
  const open = await warnings({});
  expect(open.status).toBe(200);
  expect(
    open.lines.some((l) => l.includes('/metrics') && l.includes('PLANFENCE_METRICS_TOKEN')),
  ).toBe(true);
  const closed = await warnings({ PLANFENCE_METRICS_TOKEN: 'metrics-token-0123456789' });
  expect(closed.status).toBe(401);
  expect(closed.lines.some((l) => l.includes('/metrics'))).toBe(false);
});
