/** Subscription.planPublished over graphql-ws: every pointer move, in order, none twice. */
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { startApp, type TestApp } from './support/app.js';
import { subscribed } from './support/subscribed.js';
import { until } from './support/until.js';
import { codeOf, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
const clients: Client[] = [];

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
});
afterAll(async () => {
  for (const client of clients) await client.dispose();
  await app.close();
});

function connect(token: string): Client {
  const client = createClient({
    url: `${app.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    lazy: false,
    retryAttempts: 0,
    onNonLazyError: () => undefined, // a refused socket reaches the subscription's sink
  });
  clients.push(client);
  return client;
}

/**
 * Collects what a subscription delivers until `stop()`. It returns once the service listens
 * (`listening: false`: at once, for a subscription that is to be refused).
 */
async function collect<T>(
  client: Client,
  query: string,
  variables: Record<string, unknown>,
  { listening = true } = {},
) {
  const received: T[] = [];
  const errors: unknown[] = [];
  const subscribe = () =>
    client.subscribe<T>(
      { query, variables },
      {
        next: (value) =>
          value.errors ? errors.push(value.errors) : received.push(value.data as T),
        error: (e) => errors.push(e),
        complete: () => undefined,
      },
    );
  const stop = listening ? await subscribed(app.url, 'planPublished', subscribe) : subscribe();
  return { received, errors, stop };
}

// proves: R6
test('two concurrent publishers: the subscriber sees every pointer move in order, none twice', async () => {
  const viewer = await world.issue('viewer', 'VIEWER');
  const a = await world.issue('pub-a', 'AGENT');
  const b = await world.issue('pub-b', 'AGENT');
  await world.createEnvironment('live', 'MONOTONIC', false);
  await world.createEnvironment('elsewhere', 'MONOTONIC', false);
  const ga = await world.acquire(a, 'live', 5);
  world.advance(6);
  const gb = await world.acquire(b, 'live', 600);

  const sub = await collect<{
    planPublished: { id: string; generation: number; sequence: number };
  }>(
    connect(viewer),
    'subscription($e: String!) { planPublished(environment: $e) { id generation sequence status } }',
    { e: 'live' },
  );

  const other = await world.acquire(a, 'elsewhere', 600);
  const results = await Promise.all([
    ...Array.from({ length: 15 }, (_, i) => world.submit(a, 'live', ga, `a${i}`)),
    ...Array.from({ length: 15 }, (_, i) => world.submit(b, 'live', gb, `b${i}`)),
    world.submit(a, 'elsewhere', other, 'not this environment'),
  ]);
  const published = results
    .slice(0, 30)
    .filter((r) => codeOf(r) === 'OK')
    .map((r) => r.data!.submitPlan.id);
  expect(published.length).toBeGreaterThanOrEqual(15); // b's all publish; a's until b writes

  await until(
    'every publication to reach the subscriber',
    () => sub.received.length >= published.length,
  );
  await new Promise((resolve) => setTimeout(resolve, 200)); // nothing more should come
  const moves = sub.received.map((m) => m.planPublished);
  expect(sub.errors).toEqual([]);
  expect(moves.map((m) => m.id).sort()).toEqual([...published].sort());
  expect(new Set(moves.map((m) => m.id)).size).toBe(moves.length);
  for (let i = 1; i < moves.length; i++) {
    const [p, q] = [moves[i - 1], moves[i]];
    expect(
      q.generation > p.generation || (q.generation === p.generation && q.sequence > p.sequence),
    ).toBe(true);
  }
  expect(moves.at(-1)!.id).toBe((await world.environment('live')).currentPlan?.id);
  sub.stop();
});

// proves: R9
test('approval publishes to subscribers; rejections and replays do not', async () => {
  const viewer = await world.issue('viewer-2', 'VIEWER');
  const agent = await world.issue('agent-2', 'AGENT');
  const reviewer = await world.issue('reviewer-2', 'REVIEWER');
  await world.createEnvironment('reviewed', 'STRICT');
  const g = await world.acquire(agent, 'reviewed', 600);
  const sub = await collect<{ planPublished: { id: string } }>(
    connect(viewer),
    'subscription { planPublished(environment: "reviewed") { id } }',
    {},
  );

  const plan = await world.submitOk(agent, 'reviewed', g, 'v1');
  ok(await world.approve(reviewer, plan.id, { idempotencyKey: 'once' }));
  ok(await world.approve(reviewer, plan.id, { idempotencyKey: 'once' })); // replay: no second move
  expect(codeOf(await world.approve(reviewer, plan.id))).toBe('INVALID_PLAN_STATE');

  await until('the publication to reach the subscriber', () => sub.received.length >= 1);
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(sub.received.map((m) => m.planPublished.id)).toEqual([plan.id]);
  sub.stop();
});

test('a subscription without a valid token is refused', async () => {
  const sub = await collect(
    connect('pf_not_a_token'),
    'subscription { planPublished(environment: "live") { id } }',
    {},
    { listening: false },
  );
  await until('the subscription to end with an error', () => sub.errors.length > 0);
  // The socket is closed before any acknowledgement: graphql-ws 4403, the code in the reason.
  const closed = sub.errors[0] as { code?: number; reason?: string };
  expect(closed.code).toBe(4403);
  expect(closed.reason).toMatch(/^UNAUTHENTICATED/);
});
