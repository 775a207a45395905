/**
 * Two instances on one PostgreSQL database share the webhook deliveries: every attempt is
 * made by exactly one of them (the receiver sees each delivery as many times as its
 * recorded attempts, never more), both take part, and each environment's events still
 * arrive in commit order.
 */
import {
  ADMIN_TOKEN,
  codeOf,
  ok,
  scratchDatabase,
  startApp,
  TEST_DATABASE,
  type TestApp,
} from './support/app.js';
import { Receiver, type Received } from './support/receiver.js';
import { metric } from './support/metrics.js';

const onPostgres = TEST_DATABASE === 'postgres' ? describe : describe.skip;
const ENVIRONMENTS = ['multi-a', 'multi-b', 'multi-c'];
const FAST = {
  PLANFENCE_WEBHOOK_POLL_MS: '50',
  PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '20',
  PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '200',
  PLANFENCE_WEBHOOK_CONCURRENCY: '4',
};

const deliveredBy = (instance: TestApp) =>
  metric(instance.url, 'planfence_webhook_deliveries_total{outcome="delivered"}');

onPostgres('two instances on one PostgreSQL database', () => {
  // proves: R23, R24
  test('each delivery attempt is made by one instance, both deliver, and order per environment holds', async () => {
    const receiver = new Receiver();
    receiver.holdMs = 5;
    // The first two attempts of every delivery fail: retries race between the instances too.
    const attemptsSeen = new Map<string, number>();
    receiver.answer = (request: Received) => {
      const seen = (attemptsSeen.get(request.delivery) ?? 0) + 1;
      attemptsSeen.set(request.delivery, seen);
      return seen <= 2 ? 503 : 200;
    };
    await receiver.start();
    const database = await scratchDatabase(true);
    const instances = [
      await startApp({ DATABASE_URL: database.url, ...FAST }, null),
      await startApp({ DATABASE_URL: database.url, ...FAST }, null),
    ];
    try {
      const [one, two] = instances;
      const agentToken = ok(
        await one.gql(ADMIN_TOKEN, 'mutation { issueToken(name: "agent", role: AGENT) { token } }'),
      ).issueToken.token as string;
      for (const name of ENVIRONMENTS) {
        ok(
          await one.gql(
            ADMIN_TOKEN,
            'mutation($name: String!) { createEnvironment(input: { name: $name, requireApproval: false }) { name } }',
            { name },
          ),
        );
      }
      const { webhook } = ok(
        await two.gql(
          ADMIN_TOKEN,
          'mutation($url: String!) { createWebhook(input: { url: $url, events: ["plan.published"] }) { webhook { id } } }',
          { url: receiver.url },
        ),
      ).createWebhook;

      // 20 publications per environment, through both instances at once.
      await Promise.all(
        ENVIRONMENTS.map(async (environment) => {
          for (let i = 0; i < 20; i++) {
            const instance = instances[i % 2];
            const { acquireLease } = ok(
              await instance.gql(
                agentToken,
                'mutation($e: String!) { acquireLease(input: { environment: $e }) { generation } }',
                { e: environment },
              ),
            );
            const submitted = await instance.gql(
              agentToken,
              'mutation($e: String!, $g: Int!, $k: String!) { submitPlan(input: { environment: $e, generation: $g, idempotencyKey: $k, content: "c" }) { id } }',
              { e: environment, g: acquireLease.generation, k: `${environment}-${i}` },
            );
            expect(codeOf(submitted)).toBe('OK');
          }
        }),
      );

      await Receiver.until(async () => {
        const { webhookDeliveries } = ok(
          await one.gql(
            ADMIN_TOKEN,
            'query($w: ID!) { webhookDeliveries(webhookId: $w, status: DELIVERED, first: 500) { id } }',
            { w: webhook.id },
          ),
        );
        return webhookDeliveries.length === 60;
      }, '60 deliveries');

      const { webhookDeliveries } = ok(
        await one.gql(
          ADMIN_TOKEN,
          'query($w: ID!) { webhookDeliveries(webhookId: $w, first: 500) { id attempts status } }',
          { w: webhook.id },
        ),
      );
      expect(webhookDeliveries).toHaveLength(60);
      for (const delivery of webhookDeliveries as { id: string; attempts: number }[]) {
        const receipts = receiver.received.filter((r) => r.delivery === delivery.id).length;
        // Three attempts each (two 503s, then 200), each seen once: no attempt was sent twice.
        expect({ id: delivery.id, receipts, attempts: delivery.attempts }).toEqual({
          id: delivery.id,
          receipts: 3,
          attempts: 3,
        });
      }
      const delivered = await Promise.all(instances.map(deliveredBy));
      expect(delivered[0] + delivered[1]).toBe(60);
      expect(delivered[0]).toBeGreaterThan(0);
      expect(delivered[1]).toBeGreaterThan(0);

      // Per environment, the successful receipts follow the pointer's moves.
      const successes = receiver.received.filter((r) => attemptsOf(receiver, r) === 3);
      for (const environment of ENVIRONMENTS) {
        const generations = successes
          .filter((r) => r.json.environment === environment)
          .map((r) => r.json.generation as number);
        expect(generations).toHaveLength(20);
        expect(generations).toEqual([...generations].sort((a, b) => a - b));
      }
    } finally {
      for (const instance of instances) await instance.close();
      await receiver.stop();
      await database.cleanup();
    }
  }, 120_000);
});

/** Which attempt of its delivery a receipt was (1-based, in arrival order). */
function attemptsOf(receiver: Receiver, receipt: Received): number {
  const same = receiver.received.filter((r) => r.delivery === receipt.delivery);
  return same.indexOf(receipt) + 1;
}
