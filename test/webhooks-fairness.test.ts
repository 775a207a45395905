/**
 * Webhooks that never answer cannot starve a healthy one: a request in flight longer than
 * PLANFENCE_WEBHOOK_SLOW_AFTER_MS no longer holds one of the PLANFENCE_WEBHOOK_CONCURRENCY
 * slots, so the healthy webhook's delivery is sent while the others still hang, and among
 * due deliveries the webhooks with the fewest requests in flight go first.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from './support/app.js';
import { Receiver } from './support/receiver.js';
import { ok, World } from './support/world.js';

/** Accepts every request and never answers (until stopped). */
class Silent {
  requests = 0;
  private readonly open: ServerResponse[] = [];
  private server: Server | null = null;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests++;
      this.open.push(res);
      req.resume();
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

const CREATE = `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }`;

let app: TestApp;
let world: World;
const silent = new Silent();
const healthy = new Receiver();

beforeAll(async () => {
  await silent.start();
  await healthy.start();
  app = await startApp({
    PLANFENCE_WEBHOOK_POLL_MS: '50',
    PLANFENCE_WEBHOOK_CONCURRENCY: '2',
    PLANFENCE_WEBHOOK_TIMEOUT_MS: '120000',
    PLANFENCE_WEBHOOK_SLOW_AFTER_MS: '200',
  });
  world = new World(app);
});
afterAll(async () => {
  // The silent receiver goes first: its requests then fail at once and the service stops.
  await silent.stop();
  await app.close();
  await healthy.stop();
});

test('six webhooks that never answer do not hold back a healthy one on another environment', async () => {
  await world.createEnvironment('noisy', 'MONOTONIC', false);
  await world.createEnvironment('quiet', 'MONOTONIC', false);
  for (let i = 0; i < 6; i++) {
    ok(
      await world.gql(world.admin, CREATE, {
        input: {
          url: `${silent.url}?n=${i}`,
          events: ['environment.frozen'],
          environments: ['noisy'],
        },
      }),
    );
  }
  ok(
    await world.gql(world.admin, CREATE, {
      input: { url: healthy.url, events: ['environment.frozen'], environments: ['quiet'] },
    }),
  );
  // The silent webhooks' deliveries are queued first (lower ids).
  ok(
    await world.gql(
      world.admin,
      'mutation { freezeEnvironment(environment: "noisy", reason: "a") { name } }',
    ),
  );
  await Receiver.until(() => silent.requests >= 2, 'the silent receivers to be called');
  ok(
    await world.gql(
      world.admin,
      'mutation { freezeEnvironment(environment: "quiet", reason: "b") { name } }',
    ),
  );

  await Receiver.until(() => healthy.received.length === 1, 'the healthy delivery', 30_000);
  expect(healthy.received[0].event).toBe('environment.frozen');
  // The silent ones are still hanging (their time-out is two minutes): none has been answered.
  expect(silent.requests).toBeGreaterThanOrEqual(2);
});
