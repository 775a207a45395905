/**
 * Many failing webhooks do not delay a healthy one: a line whose receiver failed its head
 * is retried after the first attempts of the other lines, so however many failing lines are
 * due, a healthy webhook's new delivery is claimed at the next free slot. Judged by the
 * order in which the receivers get their requests, which the load of a shared machine does
 * not change: few failing attempts arrive between a change and its healthy delivery (0–1
 * measured; with claims in the order the deliveries fell due, 63–69 of the 84).
 */
import { startApp, type TestApp } from './support/app.js';
import { arrivalsSoFar, Receiver } from './support/receiver.js';
import { ok, World } from './support/world.js';

const CREATE = `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }`;
const FAILING = 84;
const CONCURRENCY = 4;
const SLOW_AFTER_MS = 250;
const POLL_MS = 50;
const TIMEOUT_MS = 1000;
/**
 * The failing attempts that may reach their receiver between the healthy change and its
 * delivery: the slots' attempts in flight, and a few slots' worth more while the healthy
 * delivery is claimed and sent (each slot frees after SLOW_AFTER_MS).
 */
const MAX_AHEAD = 4 * CONCURRENCY;

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

/**
 * Freezes (or unfreezes) `environment`; resolves, once the healthy receiver has that
 * delivery, with how many of the failing webhooks' attempts reached their receiver after the
 * change was made and before it.
 */
async function failingAttemptsAhead(environment: string, freeze: boolean): Promise<number> {
  const before = healthy.received.length;
  ok(
    await world.gql(
      world.admin,
      freeze
        ? `mutation { freezeEnvironment(environment: "${environment}", reason: "r") { name } }`
        : `mutation { unfreezeEnvironment(environment: "${environment}") { name } }`,
    ),
  );
  const from = arrivalsSoFar();
  await Receiver.until(
    () => healthy.received.length > before,
    `the healthy delivery (${freeze ? 'freeze' : 'unfreeze'})`,
    60_000,
  );
  const to = healthy.received[before].order;
  return failing.received.filter((r) => r.order > from && r.order < to).length;
}

test(`${FAILING} failing webhooks do not hold a healthy one behind their retries`, async () => {
  await world.createEnvironment('quiet', 'MONOTONIC', false);
  await world.createEnvironment('noisy', 'MONOTONIC', false);
  const events = ['environment.frozen', 'environment.unfrozen'];
  ok(
    await world.gql(world.admin, CREATE, {
      input: { url: healthy.url, events, environments: ['quiet'] },
    }),
  );
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
  const ahead: number[] = [];
  for (let i = 0; i < 3; i++) {
    ahead.push(await failingAttemptsAhead('quiet', true));
    ahead.push(await failingAttemptsAhead('quiet', false));
  }
  // They are still failing meanwhile.
  const triedBefore = failing.received.length;
  await Receiver.until(() => failing.received.length > triedBefore + CONCURRENCY, 'more retries');

  if (process.env.WEBHOOKS_VERBOSE) console.log({ ahead });
  // A due delivery is claimed at the next free slot: the attempts already in flight in the
  // other slots, and those the slots freed before the claim took, get there first. Before,
  // it waited behind every failing head that was due (about one per failing webhook).
  for (const n of ahead) expect(n).toBeLessThanOrEqual(MAX_AHEAD);
}, 300_000);
