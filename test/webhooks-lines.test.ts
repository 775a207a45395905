/**
 * Webhook lines sent in runs: once a (webhook, environment) line's head is delivered, the
 * dispatcher goes on with the line's next deliveries one after another, over a kept-alive
 * connection. The order holds: a line's deliveries arrive in commit order, each once; a
 * failing delivery ends its run and is retried before anything later of its line is sent;
 * and meanwhile the other lines keep flowing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from './support/app.js';
import { until } from './support/until.js';
import { deliveries, QUICK_RETRIES, toggle } from './support/webhook-lines.js';
import { ok, World } from './support/world.js';

interface Request {
  delivery: string;
  environment: string;
  eventId: number;
  status: number;
}

/** A receiver that records every request, may hold them, and answers what `answer` says. */
class LineReceiver {
  readonly requests: Request[] = [];
  /** TCP connections opened to it. */
  connections = 0;
  answer: (request: Omit<Request, 'status'>) => number = () => 200;
  /** Awaited before each request is answered. */
  hold: Promise<void> = Promise.resolve();
  private server: Server | null = null;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        void this.hold.then(() => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            id: string;
            environment: string;
          };
          const seen = {
            delivery: String(req.headers['planfence-delivery']),
            environment: body.environment,
            eventId: Number(body.id),
          };
          const status = this.answer(seen);
          this.requests.push({ ...seen, status });
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
        });
      });
    });
    this.server.on('connection', () => this.connections++);
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  accepted(environment: string): Request[] {
    return this.requests.filter((r) => r.environment === environment && r.status < 300);
  }
}

const CREATE = `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }`;

/** Strictly increasing. */
const increasing = (values: number[]) => values.every((v, i) => i === 0 || v > values[i - 1]);

let app: TestApp;
let world: World;
let receiver: LineReceiver;

beforeEach(async () => {
  receiver = await new LineReceiver().start();
  // The tests hold the first requests until the backlog is queued, however long a loaded
  // machine takes to queue it: a held request must not time out and be sent again.
  app = await startApp({ ...QUICK_RETRIES, PLANFENCE_WEBHOOK_TIMEOUT_MS: '120000' }, null);
  world = new World(app);
});
afterEach(async () => {
  await app.close();
  await receiver.stop();
});

async function hookFor(environments: string[]): Promise<string> {
  return ok(
    await world.gql<{ createWebhook: { webhook: { id: string } } }>(world.admin, CREATE, {
      input: {
        url: receiver.url,
        events: ['environment.frozen', 'environment.unfrozen'],
        environments,
      },
    }),
  ).createWebhook.webhook.id;
}

test('a backlog of one line is sent in order, each delivery once, over kept-alive connections', async () => {
  const count = 80;
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const hook = await hookFor(['prod']);
  // The first request is held until the whole backlog is queued behind it.
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  await toggle(world, 'prod', count);
  release();

  await until(
    'every delivery DELIVERED',
    async () => {
      const list = await deliveries(world, hook);
      return list.length === count && list.every((d) => d.status === 'DELIVERED');
    },
    { progress: () => receiver.requests.length },
  );
  const accepted = receiver.accepted('prod');
  expect(accepted).toHaveLength(count);
  expect(new Set(accepted.map((r) => r.delivery)).size).toBe(count);
  expect(increasing(accepted.map((r) => r.eventId))).toBe(true);
  expect(increasing(accepted.map((r) => Number(r.delivery)))).toBe(true);
  expect((await deliveries(world, hook)).every((d) => d.attempts === 1)).toBe(true);
  // One line's requests follow each other on a connection kept open (not one per request).
  expect(receiver.connections).toBeLessThan(count / 4);
});

test('a failing delivery ends its run and is retried before the rest of its line; other lines keep flowing', async () => {
  const count = 30;
  await world.createEnvironment('prod', 'MONOTONIC', false);
  await world.createEnvironment('staging', 'MONOTONIC', false);
  const hook = await hookFor(['prod', 'staging']);
  // prod's fifth delivery fails until every staging delivery was accepted.
  const prodOrder: string[] = [];
  let target: string | null = null;
  receiver.answer = (request) => {
    if (request.environment !== 'prod') return 200;
    if (!prodOrder.includes(request.delivery)) prodOrder.push(request.delivery);
    if (prodOrder.length === 5 && target === null) target = request.delivery;
    if (request.delivery === target && receiver.accepted('staging').length < count) return 503;
    return 200;
  };
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  await toggle(world, 'prod', count);
  await toggle(world, 'staging', count);
  release();

  await until(
    'every delivery DELIVERED',
    async () => {
      const list = await deliveries(world, hook);
      return list.length === 2 * count && list.every((d) => d.status === 'DELIVERED');
    },
    { progress: () => receiver.requests.length },
  );

  for (const environment of ['prod', 'staging']) {
    const accepted = receiver.accepted(environment);
    expect(accepted).toHaveLength(count);
    expect(new Set(accepted.map((r) => r.delivery)).size).toBe(count);
    expect(increasing(accepted.map((r) => r.eventId))).toBe(true);
  }
  // The failing delivery was tried more than once; from its first failure to its success,
  // no other prod delivery was sent (its run ended, the rest of its line waited).
  const prod = receiver.requests.filter((r) => r.environment === 'prod');
  const firstFailure = prod.findIndex((r) => r.status === 503);
  const success = prod.findIndex((r) => r.delivery === target && r.status < 300);
  expect(firstFailure).toBeGreaterThanOrEqual(0);
  expect(success).toBeGreaterThan(firstFailure);
  expect(prod.slice(firstFailure, success + 1).every((r) => r.delivery === target)).toBe(true);
  expect(prod.slice(0, firstFailure).map((r) => r.delivery)).toEqual(prodOrder.slice(0, 4));
  // Staging flowed meanwhile: all of it was accepted while prod's fifth was still failing.
  const all = receiver.requests;
  const lastStaging = all.findLastIndex((r) => r.environment === 'staging');
  const targetSuccess = all.findIndex((r) => r.delivery === target && r.status < 300);
  expect(lastStaging).toBeLessThan(targetSuccess);
  const list = await deliveries(world, hook);
  expect(list.find((d) => d.id === target)!.attempts).toBeGreaterThanOrEqual(2);
  expect(list.filter((d) => d.id !== target).every((d) => d.attempts === 1)).toBe(true);
});
