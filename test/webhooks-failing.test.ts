/**
 * Many failing webhooks do not delay a healthy one: a line whose receiver failed its head
 * is retried after the first attempts of the other lines, so however many failing lines are
 * due, a healthy webhook's new delivery is claimed at the next free slot. Its delay stays
 * within SLOW_AFTER_MS (a hanging request frees its slot then) of what it is with no
 * failing webhook at all, measured first in the same test.
 */
import { startApp, type TestApp } from './support/app.js';
import { Receiver } from './support/receiver.js';
import { ok, World } from './support/world.js';

const CREATE = `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }`;
const FAILING = 84;
const CONCURRENCY = 4;
const SLOW_AFTER_MS = 250;
const POLL_MS = 50;
const TIMEOUT_MS = 1000;

let app: TestApp;
let world: World;
const healthy = new Receiver();
/** Holds every request past the time-out, then answers 503: each attempt fails slowly. */
const failing = new Receiver();

beforeAll(async () => {
  failing.keep = false;
  await healthy.start();
  await failing.start();
  failing.keep = true;
  failing.holdMs = TIMEOUT_MS + 500;
  failing.answer = () => 503;
  app = await startApp(
    {
      PLANFENCE_WEBHOOK_POLL_MS: String(POLL_MS),
      PLANFENCE_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
      PLANFENCE_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      PLANFENCE_WEBHOOK_SLOW_AFTER_MS: String(SLOW_AFTER_MS),
      PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '100',
      PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '400',
      PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '1000',
      // The service's own clock: back-offs end as time passes.
    },
    null,
  );
  world = new World(app);
});
afterAll(async () => {
  // Refused connections fail at once: the dispatcher's shutdown waits for no time-out.
  await failing.stop();
  await app.close();
  await healthy.stop();
});

/** Freezes (or unfreezes) `environment`; resolves with ms until the healthy receiver had it. */
async function healthyDelay(environment: string, freeze: boolean): Promise<number> {
  const before = healthy.received.length;
  const started = Date.now();
  ok(
    await world.gql(
      world.admin,
      freeze
        ? `mutation { freezeEnvironment(environment: "${environment}", reason: "r") { name } }`
        : `mutation { unfreezeEnvironment(environment: "${environment}") { name } }`,
    ),
  );
  await Receiver.until(
    () => healthy.received.length > before,
    `the healthy delivery (${freeze ? 'freeze' : 'unfreeze'})`,
    60_000,
  );
  return healthy.received[before].at - started;
}

test(`${FAILING} failing webhooks do not delay a healthy one beyond SLOW_AFTER_MS of its delay alone`, async () => {
  await world.createEnvironment('quiet', 'MONOTONIC', false);
  await world.createEnvironment('noisy', 'MONOTONIC', false);
  const events = ['environment.frozen', 'environment.unfrozen'];
  ok(
    await world.gql(world.admin, CREATE, {
      input: { url: healthy.url, events, environments: ['quiet'] },
    }),
  );

  // The baseline: the healthy webhook alone.
  const alone: number[] = [];
  for (let i = 0; i < 3; i++) {
    alone.push(await healthyDelay('quiet', true));
    alone.push(await healthyDelay('quiet', false));
  }
  const baseline = Math.max(...alone);

  for (let i = 0; i < FAILING; i++) {
    ok(
      await world.gql(world.admin, CREATE, {
        input: { url: `${failing.url}?n=${i}`, events, environments: ['noisy'] },
      }),
    );
  }
  ok(
    await world.gql(
      world.admin,
      'mutation { freezeEnvironment(environment: "noisy", reason: "flood") { name } }',
    ),
  );
  // The failing lines fail their heads and retry (back-off at most 400 ms, each attempt
  // hanging for the 1 s time-out): from now on, failing heads are due at every moment.
  await Receiver.until(() => {
    const tried = failing.received.map((r) => r.delivery);
    return tried.length > new Set(tried).size && tried.length >= 4 * CONCURRENCY;
  }, 'the failing webhooks to retry');
  const flooded: number[] = [];
  for (let i = 0; i < 3; i++) {
    flooded.push(await healthyDelay('quiet', true));
    flooded.push(await healthyDelay('quiet', false));
  }
  // They are still failing meanwhile.
  const triedBefore = failing.received.length;
  await Receiver.until(() => failing.received.length > triedBefore + CONCURRENCY, 'more retries');

  // A due delivery waits at most for one slot to free: SLOW_AFTER_MS, plus a look (POLL_MS).
  // The bound the docs gave before, SLOW_AFTER_MS × failing ÷ concurrency, is far above it.
  const bound = baseline * 3 + 2 * (SLOW_AFTER_MS + POLL_MS);
  expect(bound).toBeLessThan((SLOW_AFTER_MS * FAILING) / CONCURRENCY);
  for (const delay of flooded) expect(delay).toBeLessThanOrEqual(bound);
}, 300_000);
