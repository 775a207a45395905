/**
 * kill -9 of the service while webhook deliveries are pending and one is in the middle of
 * its request: after the restart every committed event is delivered (at least once; a
 * repeat carries the same delivery id), in commit order per environment, and no event of a
 * decision that did not commit is ever sent.
 */
import { ADMIN_TOKEN, ServiceProcess } from './fault/service.js';
import { scratchDatabase } from './support/app.js';
import { Receiver, type Received } from './support/receiver.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ENVIRONMENTS = ['crash-a', 'crash-b'];

/**
 * The two ways of delivering, each a webhook with a receiver of its own on the same service:
 * the kills cut both at once, and each is checked on its own.
 */
const DELIVERIES = [
  { name: 'one event per request', batchSize: 1 },
  { name: 'batches of up to 5 events', batchSize: 5 },
];

// proves: R22, R23
describe('after kill -9 with deliveries pending and mid-request, every committed event arrives and nothing uncommitted is sent', () => {
  test(
    DELIVERIES.map((d) => d.name).join(', and '),
    async () => {
      const receivers = DELIVERIES.map(() => {
        const receiver = new Receiver();
        receiver.holdMs = 40; // a request is nearly always open when the kill comes
        return receiver;
      });
      for (const receiver of receivers) await receiver.start();
      const database = await scratchDatabase(true);
      const service = new ServiceProcess(
        database.url.startsWith('sqlite:') ? database.url.slice('sqlite:'.length) : database.url,
        {
          PLANFENCE_WEBHOOK_POLL_MS: '100',
          PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '50',
          PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '500',
          PLANFENCE_WEBHOOK_TIMEOUT_MS: '2000',
          // One instance at a time: on PostgreSQL the restarted one takes the killed one's
          // lines when their claims expire, 2 s + this after they were made.
          PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS: '1000',
        },
      );
      try {
        await service.start();
        const agent = await service.issueToken('agent', 'AGENT');
        for (const name of ENVIRONMENTS) {
          await service.ok(
            ADMIN_TOKEN,
            'mutation($name: String!) { createEnvironment(input: { name: $name, requireApproval: false }) { name } }',
            { name },
          );
        }
        const webhookIds: string[] = [];
        for (const [i, { batchSize }] of DELIVERIES.entries()) {
          const { createWebhook } = await service.ok(
            ADMIN_TOKEN,
            `mutation($url: String!, $batchSize: Int!) { createWebhook(input: { url: $url, events: ["plan.submitted", "plan.published"], environments: ["crash-*"], batchSize: $batchSize }) { webhook { id } } }`,
            { url: receivers[i].url, batchSize },
          );
          webhookIds.push(createWebhook.webhook.id);
        }

        const acknowledged: string[] = [];
        let staleRejected = 0;
        let keys = 0;
        for (let crash = 0; crash < 3; crash++) {
          let running = true;
          const workers = ENVIRONMENTS.map(async (environment) => {
            while (running) {
              try {
                const lease = await service.gql(
                  agent,
                  'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 60 }) { generation } }',
                  { e: environment },
                );
                const generation: number = lease.data!.acquireLease.generation;
                const submitted = await service.gql(
                  agent,
                  'mutation($e: String!, $g: Int!, $k: String!) { submitPlan(input: { environment: $e, generation: $g, idempotencyKey: $k, content: "c" }) { id } }',
                  { e: environment, g: generation, k: `k${++keys}` },
                );
                if (submitted.errors) throw new Error(JSON.stringify(submitted.errors));
                acknowledged.push(submitted.data!.submitPlan.id);
                // A stale submit in the same stream: rejected, so it must never be announced.
                const stale = await service.gql(
                  agent,
                  'mutation($e: String!, $g: Int!, $k: String!) { submitPlan(input: { environment: $e, generation: $g, idempotencyKey: $k, content: "late" }) { id } }',
                  { e: environment, g: generation - 1, k: `k${++keys}` },
                );
                if (generation > 1) {
                  expect(stale.errors?.[0].extensions.code).toBe('STALE_GENERATION');
                  staleRejected++;
                }
              } catch {
                return; // the service is gone
              }
            }
          });
          // The kill comes after this round's work has made progress (counted, not waited for).
          const roundStart = acknowledged.length;
          while (acknowledged.length < roundStart + 4) await sleep(5);
          await sleep(crash * 7);
          await service.crash();
          running = false;
          await Promise.all(workers);
          await service.start();
        }
        // No kill comes any more: the receivers answer at once.
        for (const receiver of receivers) receiver.holdMs = 0;

        // The committed state, read back after the last restart.
        const committed = new Map<string, { id: string; publishedAt: string | null }[]>();
        for (const environment of ENVIRONMENTS) {
          const { plans } = await service.ok(
            ADMIN_TOKEN,
            'query($e: String!) { plans(environment: $e, first: 500) { id publishedAt } }',
            { e: environment },
          );
          committed.set(environment, plans);
        }
        const committedIds = [...committed.values()].flat().map((p) => p.id);
        expect(committedIds.length).toBeGreaterThan(10);
        expect(staleRejected).toBeGreaterThan(0);
        // Every acknowledged submit committed.
        expect(committedIds).toEqual(expect.arrayContaining(acknowledged));

        for (const [i, { name, batchSize }] of DELIVERIES.entries()) {
          const receiver = receivers[i];
          // Every committed plan's two events arrive (the service delivers what was pending at each crash).
          const expected = committedIds.length * 2;
          await Receiver.until(async () => {
            const { webhookDeliveries } = await service.ok(
              ADMIN_TOKEN,
              'query($w: ID!) { webhookDeliveries(webhookId: $w, status: PENDING, first: 1) { id } }',
              { w: webhookIds[i] },
            );
            return (
              webhookDeliveries.length === 0 &&
              distinctEvents(eachDelivery(receiver.received)).size >= expected
            );
          }, `${expected} events at the receiver of ${name}`);

          const received = eachDelivery(receiver.received);
          if (batchSize > 1) expect(received.length).toBeGreaterThan(receiver.received.length);
          const byEvent = distinctEvents(received);
          // Duplicates only with the same delivery id.
          for (const [eventId, deliveries] of byEvent) {
            expect({ eventId, deliveries: deliveries.size }).toEqual({ eventId, deliveries: 1 });
          }
          const first = firstReceipts(received);
          const submittedIds = first
            .filter((r) => r.event === 'plan.submitted')
            .map((r) => r.json.planId);
          const publishedIds = first
            .filter((r) => r.event === 'plan.published')
            .map((r) => r.json.planId);
          // Exactly the committed plans: none that did not commit (a stale submit, a write cut by the kill).
          expect([...submittedIds].sort()).toEqual([...committedIds].sort());
          expect([...publishedIds].sort()).toEqual([...committedIds].sort());

          // Per environment, in commit order: event ids increase, and publications follow the fence.
          for (const environment of ENVIRONMENTS) {
            const mine = first.filter((r) => r.json.environment === environment);
            const ids = mine.map((r) => Number(r.json.id));
            expect(ids).toEqual([...ids].sort((a, b) => a - b));
            const generations = mine
              .filter((r) => r.event === 'plan.published')
              .map((r) => r.json.generation as number);
            expect(generations).toEqual([...generations].sort((a, b) => a - b));
          }
        }
      } finally {
        await service.stop();
        for (const receiver of receivers) await receiver.stop();
        await database.cleanup();
      }
    },
    180_000,
  );
});

/** Every delivery a request carried, as if each had come alone (a batch's body lists several). */
function eachDelivery(received: Received[]): Received[] {
  return received.flatMap((r) =>
    Array.isArray(r.json?.deliveries)
      ? (r.json.deliveries as { delivery: string; type: string }[]).map((d) => ({
          ...r,
          delivery: d.delivery,
          event: d.type,
          json: d,
        }))
      : [r],
  );
}

/** Event id → the delivery ids it arrived under. */
function distinctEvents(received: Received[]): Map<string, Set<string>> {
  const events = new Map<string, Set<string>>();
  for (const r of received) {
    if (!r.json) continue;
    const deliveries = events.get(String(r.json.id)) ?? new Set<string>();
    deliveries.add(r.delivery);
    events.set(String(r.json.id), deliveries);
  }
  return events;
}

/** Each delivery's first arrival, in arrival order. */
function firstReceipts(received: Received[]): Received[] {
  const seen = new Set<string>();
  return received.filter((r) => !seen.has(r.delivery) && seen.add(r.delivery));
}
