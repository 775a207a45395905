/**
 * Webhooks that take batches: a webhook created with `batchSize` N > 1 gets up to N
 * consecutive deliveries of one (webhook, environment) line per request, in commit order,
 * signed like any request; the headers list the deliveries and event types of the body. A
 * failed request is the attempt of its first delivery, which is retried before anything
 * after it; every delivery is accepted once. Webhooks of batch size 1 are unchanged.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createReceiver } from '../examples/webhook-receiver.js';
import { verifyWebhook, type WebhookBatch, type WebhookEvent } from '../src/client/index.js';
import { startApp, type TestApp } from './support/app.js';
import { until } from './support/until.js';
import { type Delivery, deliveries, QUICK_RETRIES, toggle } from './support/webhook-lines.js';
import { codeOf, ok, World } from './support/world.js';

interface Request {
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

/** Records every request; `hold` is awaited before each answer, `answer` gives its status. */
class BatchReceiver {
  readonly requests: Request[] = [];
  answer: (body: string) => number = () => 200;
  hold: Promise<void> = Promise.resolve();
  private server: Server | null = null;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        void this.hold.then(() => {
          const body = Buffer.concat(chunks).toString('utf8');
          const status = this.answer(body);
          this.requests.push({ headers: req.headers, body, status });
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
        });
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  /** The delivery ids of the requests answered 2xx, in the order they arrived. */
  accepted(): string[] {
    return this.requests
      .filter((r) => r.status < 300)
      .flatMap((r) => (JSON.parse(r.body) as WebhookBatch).deliveries.map((d) => d.delivery));
  }
}

const CREATE = `mutation($input: CreateWebhookInput!) {
  createWebhook(input: $input) { secret webhook { id batchSize } } }`;

let app: TestApp;
let world: World;
let receiver: BatchReceiver;

beforeEach(async () => {
  receiver = await new BatchReceiver().start();
  app = await startApp(QUICK_RETRIES, null);
  world = new World(app);
});
afterEach(async () => {
  await app.close();
  await receiver.stop();
});

async function batchHook(batchSize: number): Promise<{ id: string; secret: string }> {
  const created = ok(
    await world.gql<{
      createWebhook: { secret: string; webhook: { id: string; batchSize: number } };
    }>(world.admin, CREATE, {
      input: {
        url: receiver.url,
        events: ['environment.frozen', 'environment.unfrozen'],
        environments: ['prod'],
        batchSize,
      },
    }),
  ).createWebhook;
  expect(created.webhook.batchSize).toBe(batchSize);
  return { id: created.webhook.id, secret: created.secret };
}

async function allDelivered(webhookId: string, count: number): Promise<Delivery[]> {
  let list: Delivery[] = [];
  await until(
    'every delivery DELIVERED',
    async () => {
      list = await deliveries(world, webhookId);
      return list.length === count && list.every((d) => d.status === 'DELIVERED');
    },
    { progress: () => receiver.requests.length },
  );
  return list;
}

const ascending = (ids: string[]) => [...ids].sort((a, b) => Number(a) - Number(b));

test('a backlog of one line arrives in signed requests of up to batchSize deliveries, in commit order, each once', async () => {
  const count = 45;
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const hook = await batchHook(10);
  // The first request is held until the whole backlog is queued behind it.
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  await toggle(world, 'prod', count);
  await until(
    'every delivery queued',
    async () => (await deliveries(world, hook.id)).length === count,
  );
  release();

  const list = await allDelivered(hook.id, count);
  expect(list.every((d) => d.attempts === 1)).toBe(true);
  const accepted = receiver.accepted();
  expect(accepted).toEqual(ascending(list.map((d) => d.id)));
  // Batched: far fewer requests than deliveries, none over the batch size.
  expect(receiver.requests.length).toBeLessThanOrEqual(1 + Math.ceil((count - 1) / 10));
  let lastEvent = 0;
  for (const request of receiver.requests) {
    const batch = verifyWebhook<WebhookBatch>(hook.secret, request.headers, request.body);
    expect(batch.deliveries.length).toBeGreaterThan(0);
    expect(batch.deliveries.length).toBeLessThanOrEqual(10);
    // The headers list the body's deliveries and event types, in order.
    expect(String(request.headers['planfence-delivery'])).toBe(
      batch.deliveries.map((d) => d.delivery).join(', '),
    );
    expect(String(request.headers['planfence-event'])).toBe(
      batch.deliveries.map((d) => d.type).join(', '),
    );
    for (const event of batch.deliveries) {
      expect(event.environment).toBe('prod');
      expect(['environment.frozen', 'environment.unfrozen']).toContain(event.type);
      // Commit order: event ids increase across and within requests.
      expect(Number(event.id)).toBeGreaterThan(lastEvent);
      lastEvent = Number(event.id);
    }
  }
});

test('a failed batch is retried from its first delivery, and nothing after it arrives before it', async () => {
  const count = 30;
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const hook = await batchHook(8);
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  // The first request that carries more than one delivery fails twice.
  let failures = 0;
  let failedFirst: string | null = null;
  receiver.answer = (body) => {
    const batch = JSON.parse(body) as WebhookBatch;
    if (failures < 2 && batch.deliveries.length > 1 && failedFirst === null)
      failedFirst = batch.deliveries[0].delivery;
    if (failures < 2 && batch.deliveries[0].delivery === failedFirst) {
      failures++;
      return 503;
    }
    return 200;
  };
  await toggle(world, 'prod', count);
  release();

  const list = await allDelivered(hook.id, count);
  expect(failures).toBe(2);
  // Every delivery accepted exactly once, in commit order, the failed one included.
  expect(receiver.accepted()).toEqual(ascending(list.map((d) => d.id)));
  // Between the first failure and the retry that succeeded, nothing of the line arrived.
  const firsts = receiver.requests.map(
    (r) => (JSON.parse(r.body) as WebhookBatch).deliveries[0].delivery,
  );
  const firstFailure = receiver.requests.findIndex((r) => r.status >= 300);
  const retried = receiver.requests.findIndex(
    (r, i) => i > firstFailure && r.status < 300 && firsts[i] === failedFirst,
  );
  expect(retried).toBeGreaterThan(firstFailure);
  expect(firsts.slice(firstFailure, retried + 1).every((first) => first === failedFirst)).toBe(
    true,
  );
  // After its first failure the delivery was retried alone.
  const retries = receiver.requests.filter((r, i) => i > firstFailure && firsts[i] === failedFirst);
  expect(retries.length).toBeGreaterThanOrEqual(2);
  expect(retries.every((r) => (JSON.parse(r.body) as WebhookBatch).deliveries.length === 1)).toBe(
    true,
  );
  // The failures were the attempts of the request's first delivery only.
  expect(list.find((d) => d.id === failedFirst)!.attempts).toBe(3);
  expect(list.filter((d) => d.id !== failedFirst).every((d) => d.attempts === 1)).toBe(true);
});

test('an event the receiver always refuses ends FAILED on its own; the events before and after it in its batch arrive', async () => {
  await app.close();
  app = await startApp({ ...QUICK_RETRIES, PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '3' }, null);
  world = new World(app);
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const hook = await batchHook(10);
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  await toggle(world, 'prod', 12);
  const queued = await until('every delivery queued', async () => {
    const list = await deliveries(world, hook.id);
    return list.length === 12 && list;
  });
  // The third delivery of the line is one the receiver can never take.
  const poison = ascending(queued.map((d) => d.id))[2];
  receiver.answer = (body) =>
    (JSON.parse(body) as WebhookBatch).deliveries.some((d) => d.delivery === poison) ? 400 : 200;
  release();

  let list: Delivery[] = [];
  await until(
    'no delivery PENDING',
    async () => {
      list = await deliveries(world, hook.id);
      return list.every((d) => d.status !== 'PENDING');
    },
    { progress: () => receiver.requests.length },
  );
  expect(list.find((d) => d.id === poison)).toMatchObject({ status: 'FAILED', attempts: 3 });
  expect(list.filter((d) => d.id !== poison).every((d) => d.status === 'DELIVERED')).toBe(true);
  expect(receiver.accepted()).toEqual(
    ascending(list.filter((d) => d.id !== poison).map((d) => d.id)),
  );
});

test('batchSize is 1 unless given, and outside 1..100 it is refused with BAD_USER_INPUT naming it', async () => {
  const plain = ok(
    await world.gql<{ createWebhook: { webhook: { batchSize: number } } }>(world.admin, CREATE, {
      input: { url: receiver.url, events: ['plan.published'] },
    }),
  ).createWebhook.webhook;
  expect(plain.batchSize).toBe(1);
  for (const batchSize of [0, -1, 101]) {
    const refused = await world.gql(world.admin, CREATE, {
      input: { url: receiver.url, events: ['plan.published'], batchSize },
    });
    expect(codeOf(refused)).toBe('BAD_USER_INPUT');
    expect(refused.errors![0].message).toContain('batchSize');
  }
  const listed = ok(
    await world.gql<{ webhooks: { batchSize: number }[] }>(
      world.admin,
      '{ webhooks { batchSize } }',
    ),
  ).webhooks;
  expect(listed.map((w) => w.batchSize)).toEqual([1]);
});

test('a SLACK webhook that takes batches gets one line per event in one message', async () => {
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const created = ok(
    await world.gql<{ createWebhook: { webhook: { id: string } } }>(world.admin, CREATE, {
      input: {
        url: receiver.url,
        events: ['environment.frozen', 'environment.unfrozen'],
        format: 'SLACK',
        batchSize: 5,
      },
    }),
  ).createWebhook.webhook;
  let release!: () => void;
  receiver.hold = new Promise<void>((resolve) => (release = resolve));
  await toggle(world, 'prod', 6);
  release();
  await allDelivered(created.id, 6);
  const lines = receiver.requests.flatMap((r) =>
    (JSON.parse(r.body) as { text: string }).text.split('\n'),
  );
  expect(lines).toHaveLength(6);
  expect(lines.every((line) => line.includes('prod'))).toBe(true);
  expect(receiver.requests.length).toBeLessThan(6);
});

test('the example receiver takes batches: it acts on each event once, in order, and a redelivery is a duplicate', async () => {
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const hook = await batchHook(5);
  // The example receiver on the port the webhook points at.
  await receiver.stop();
  const acted: WebhookEvent[] = [];
  const example = createReceiver(hook.secret, (event) => {
    acted.push(event);
    return Promise.resolve();
  });
  await new Promise<void>((resolve) =>
    example.listen(Number(new URL(receiver.url).port), '127.0.0.1', resolve),
  );
  try {
    await toggle(world, 'prod', 12);
    const list = await allDelivered(hook.id, 12);
    expect(acted).toHaveLength(12);
    expect(acted.map((e) => Number(e.id))).toEqual(
      [...acted.map((e) => Number(e.id))].sort((a, b) => a - b),
    );
    // A redelivery carries the same delivery id: delivered again, not acted on again.
    ok(
      await world.gql(
        world.admin,
        'mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { id } }',
        {
          id: list[0].id,
        },
      ),
    );
    await allDelivered(hook.id, 12);
    expect(acted).toHaveLength(12);
  } finally {
    example.closeAllConnections();
    await new Promise((resolve) => example.close(resolve));
  }
});
