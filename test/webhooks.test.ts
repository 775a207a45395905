/**
 * Webhooks (DESIGN R22–R23) against a real HTTP receiver: every event type arrives once,
 * signed; per environment in commit order under concurrent decisions; a receiver that is
 * down gets retries with back-off and then everything in order; FAILED after the last
 * attempt and redelivered on request; the SLACK format; input checks and roles.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createReceiver, handle } from '../examples/webhook-receiver.js';
import { verifyWebhook, type WebhookDelivery, type WebhookEvent } from '../src/client/index.js';
import { EVENT_TYPES } from '../src/outbox/outbox-event.js';
import { Database, select } from '../src/database/database.js';
import { RetentionService } from '../src/retention/retention.service.js';
import { scratchDatabase, startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { until } from './support/until.js';
import { codeOf, ok, World } from './support/world.js';

interface Received {
  path: string;
  delivery: string;
  event: string;
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

/** A webhook receiver on a loopback port that answers what `answer` says and records every request. */
class Receiver {
  readonly requests: Received[] = [];
  answer: () => number = () => 200;
  /** Awaited before answering each request (holds a request in flight). */
  hold: () => Promise<void> = () => Promise.resolve();
  private server: Server | null = null;
  port = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on(
        'end',
        () =>
          void this.hold().then(() => {
            const status = this.answer();
            this.requests.push({
              path: req.url ?? '',
              delivery: String(req.headers['planfence-delivery']),
              event: String(req.headers['planfence-event']),
              headers: req.headers,
              body: Buffer.concat(chunks).toString('utf8'),
              status,
            });
            res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
          }),
      );
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening: requests now get "connection refused" (restart on the same port with start()). */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  /** The requests answered 2xx, in arrival order. */
  accepted(): Received[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300);
  }
}

const DELIVERY_FIELDS =
  'id webhookId event environment status attempts createdAt lastAttemptAt nextAttemptAt lastError deliveredAt';

const CREATE = `mutation($input: CreateWebhookInput!) {
  createWebhook(input: $input) { webhook { id url events environments format createdAt } secret } }`;

async function createWebhook(
  world: World,
  input: { url: string; events: string[]; environments?: string[] | null; format?: string },
  token = world.admin,
) {
  return world.gql<{
    createWebhook: {
      webhook: { id: string; url: string; events: string[]; environments: string[] | null };
      secret: string;
    };
  }>(token, CREATE, { input });
}

async function deliveries(
  world: World,
  webhookId: string,
  status?: string,
): Promise<WebhookDelivery[]> {
  return ok(
    await world.gql<{ webhookDeliveries: WebhookDelivery[] }>(
      world.admin,
      `query($id: ID!, $status: DeliveryStatus) {
         webhookDeliveries(webhookId: $id, status: $status, first: 500) { ${DELIVERY_FIELDS} } }`,
      { id: webhookId, status },
    ),
  ).webhookDeliveries;
}

/** Waits until the webhook has `count` deliveries and all of them are DELIVERED. */
function allDelivered(world: World, webhookId: string, count: number): Promise<WebhookDelivery[]> {
  let delivered = 0;
  return until(
    `${count} deliveries of ${webhookId} DELIVERED`,
    async () => {
      const list = await deliveries(world, webhookId);
      delivered = list.filter((d) => d.status === 'DELIVERED').length;
      return list.length === count && delivered === count && list;
    },
    { progress: () => delivered },
  );
}

function hmac(secret: string, t: string, body: string): string {
  return createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
}

describe('every event type', () => {
  let app: TestApp;
  let world: World;
  let receiver: Receiver;
  let slack: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    slack = await new Receiver().start();
    app = await startApp({
      PLANFENCE_WEBHOOK_POLL_MS: '50',
      PLANFENCE_PLAN_RETENTION_DAYS: '1',
      PLANFENCE_WEBHOOK_MAX_AGE_SECONDS: String(30 * 86400),
    });
    world = new World(app);
  });
  afterAll(async () => {
    await app.close();
    await receiver.stop();
    await slack.stop();
  });

  // proves: R22, R23
  test('arrives once, in commit order, with the documented body and headers and a signature that verifies', async () => {
    const created = ok(
      await createWebhook(world, { url: receiver.url, events: [...EVENT_TYPES] }),
    ).createWebhook;
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(created.webhook).toMatchObject({
      url: receiver.url,
      events: [...EVENT_TYPES],
      environments: null,
      format: 'JSON',
    });
    const slackHook = ok(
      await createWebhook(world, {
        url: slack.url,
        events: ['plan.published', 'environment.frozen'],
        environments: ['pr*'],
        format: 'SLACK',
      }),
    ).createWebhook;
    // The secret is shown once: nothing reads it back.
    const listed = ok(
      await world.gql<{ webhooks: Record<string, unknown>[] }>(
        world.admin,
        '{ webhooks { id url events environments format createdAt } }',
      ),
    ).webhooks;
    expect(listed.map((w) => w.id).sort()).toEqual(
      [created.webhook.id, slackHook.webhook.id].sort(),
    );
    expect(JSON.stringify(listed)).not.toContain(created.secret);

    const agent = await world.issue('agent', 'AGENT');
    const reviewer = await world.issue('reviewer', 'REVIEWER');
    const deployer = await world.issue('deployer', 'DEPLOYER');
    const d = new Deployments(world);
    await world.createEnvironment('prod', 'MONOTONIC');
    ok(
      await world.gql(
        world.admin,
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
        { input: { environment: 'prod', proposalTtlSeconds: 60 } },
      ),
    );
    const generation = await world.acquire(agent, 'prod');
    const first = await world.submitOk(agent, 'prod', generation, 'scale web to 4', {
      title: 'scale <!channel> web',
    }); // plan.submitted
    ok(await world.approve(reviewer, first.id)); // plan.published
    const second = await world.submitOk(agent, 'prod', generation, 'drop the database'); // plan.submitted
    ok(await world.reject(reviewer, second.id, 'no')); // plan.rejected
    const third = await world.submitOk(agent, 'prod', generation, 'left alone'); // plan.submitted
    const checker = await world.issue('checker', 'CHECKER');
    ok(
      await world.gql(
        checker,
        'mutation($id: ID!) { reportCheck(input: { planId: $id, name: "scan", status: PENDING }) { id } }',
        { id: third.id },
      ),
    ); // check.reported
    // The test clock jumps only while nothing is in flight.
    const quiet = () =>
      until('no delivery pending', async () => {
        for (const id of [created.webhook.id, slackHook.webhook.id])
          if ((await deliveries(world, id, 'PENDING')).length) return false;
        return true;
      });
    await quiet();
    world.advance(61);
    await app.get(RetentionService).purge(); // plan.expired
    expect((await world.plan(third.id))?.status).toBe('EXPIRED');
    const started = await d.startOk(deployer, 'prod', first.id, 5); // deployment.started
    ok(await d.finish(deployer, started.id, 'SUCCEEDED')); // deployment.finished
    const lapsing = await d.startOk(deployer, 'prod', first.id, 5); // deployment.started
    await quiet();
    world.advance(6);
    await app.get(RetentionService).purge(); // deployment.unknown
    ok(await d.reconcile(reviewer, lapsing.id, 'FAILED', 'runner lost')); // deployment.reconciled
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "prod", reason: "incident 7") { name } }',
      ),
    ); // environment.frozen
    ok(
      await world.gql(
        world.admin,
        'mutation { unfreezeEnvironment(environment: "prod") { name } }',
      ),
    ); // environment.unfrozen
    ok(
      await world.gql(
        world.admin,
        'mutation { updateEnvironmentPolicy(input: { environment: "prod", queueMode: LATEST }) { name } }',
      ),
    );
    const held = await world.acquire(agent, 'prod');
    const enqueue = (instance: string) =>
      world.gql(
        agent,
        'mutation($instance: String) { enqueueLease(input: { environment: "prod", instance: $instance }) { id status } }',
        { instance },
      );
    ok(await enqueue('a'));
    ok(await enqueue('b')); // lease.superseded
    ok(await world.release(agent, 'prod', held)); // lease.granted
    ok(
      await world.gql(
        deployer,
        'mutation { reportDrift(environment: "prod", detail: "a security group changed by hand") { name } }',
      ),
    ); // environment.drifted

    const expected = [
      'plan.submitted',
      'plan.published',
      'plan.submitted',
      'plan.rejected',
      'plan.submitted',
      'check.reported',
      'plan.expired',
      'deployment.started',
      'deployment.finished',
      'deployment.started',
      'deployment.unknown',
      'deployment.reconciled',
      'environment.frozen',
      'environment.unfrozen',
      'lease.superseded',
      'lease.granted',
      'environment.drifted',
    ];
    const delivered = await allDelivered(world, created.webhook.id, expected.length);
    // Arrived once each, in commit order (event ids increase in commit order).
    expect(receiver.requests.map((r) => r.event)).toEqual(expected);
    expect(new Set(receiver.requests.map((r) => r.delivery)).size).toBe(expected.length);
    expect(receiver.requests.map((r) => r.delivery)).toEqual(
      delivered.map((x) => x.id).reverse(), // webhookDeliveries is newest first
    );
    const events = receiver.requests.map((r) => JSON.parse(r.body) as WebhookEvent);
    const ids = events.map((e) => Number(e.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(new Set(EVENT_TYPES)).toEqual(new Set(events.map((e) => e.type)));
    // What the preconditions' events carry.
    expect(events.find((e) => e.type === 'check.reported')).toMatchObject({
      planId: third.id,
      actor: 'checker',
      data: { planId: third.id, name: 'scan', status: 'PENDING', summary: null, detailsUrl: null },
    });
    expect(events.find((e) => e.type === 'environment.drifted')).toMatchObject({
      environment: 'prod',
      data: { name: 'prod', detail: 'a security group changed by hand' },
    });

    for (const request of receiver.requests) {
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.headers['user-agent']).toBe('planfence');
      const signature = String(request.headers['planfence-signature']);
      const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(signature);
      expect(match).not.toBeNull();
      // The documented algorithm, computed here independently: hex HMAC-SHA256(secret, "<t>.<body>").
      expect(match![2]).toBe(hmac(created.secret, match![1], request.body));
      const verified = verifyWebhook(created.secret, request.headers, request.body);
      expect(verified.type).toBe(request.event);
      // A wrong secret or a changed body does not verify.
      expect(() => verifyWebhook(`${created.secret}x`, request.headers, request.body)).toThrow(
        'does not match',
      );
      expect(() =>
        verifyWebhook(created.secret, request.headers, request.body.replace('prod', 'prud')),
      ).toThrow('does not match');
    }
    // Headers as a plain object in any case, or as a fetch Headers.
    const sample = receiver.requests[0];
    const mixedCase = { 'Planfence-Signature': String(sample.headers['planfence-signature']) };
    expect(verifyWebhook(created.secret, mixedCase, sample.body).id).toBe(events[0].id);
    expect(verifyWebhook(created.secret, new Headers(mixedCase), Buffer.from(sample.body)).id).toBe(
      events[0].id,
    );
    expect(() => verifyWebhook(created.secret, {}, sample.body)).toThrow('no Planfence-Signature');
    // An old signature is refused even with the right secret.
    const old = Math.floor(Date.now() / 1000) - 3600;
    const body = receiver.requests[0].body;
    expect(() =>
      verifyWebhook(
        created.secret,
        new Headers({
          'Planfence-Signature': `t=${old},v1=${hmac(created.secret, String(old), body)}`,
        }),
        body,
      ),
    ).toThrow('tolerance');

    const byType = new Map(events.map((e) => [e.type, e]));
    const published = byType.get('plan.published')!;
    expect(Object.keys(published)).toEqual([
      'id',
      'type',
      'at',
      'environment',
      'generation',
      'sequence',
      'planId',
      'deploymentSequence',
      'actor',
      'data',
    ]);
    expect(published).toMatchObject({
      environment: 'prod',
      generation,
      sequence: first.sequence,
      planId: first.id,
      deploymentSequence: null,
      actor: 'reviewer',
      data: { id: first.id, status: 'PUBLISHED', contentHash: first.contentHash },
    });
    expect(new Date(published.at).toISOString()).toBe(published.at);
    expect(published.data).not.toHaveProperty('content');
    expect(byType.get('plan.rejected')).toMatchObject({
      planId: second.id,
      actor: 'reviewer',
      data: { rejectionReason: 'no' },
    });
    expect(byType.get('plan.expired')).toMatchObject({
      planId: third.id,
      data: { status: 'EXPIRED' },
    });
    expect(byType.get('deployment.finished')).toMatchObject({
      planId: first.id,
      generation,
      sequence: first.sequence,
      deploymentSequence: started.sequence,
      actor: 'deployer',
      data: { id: started.id, status: 'SUCCEEDED' },
    });
    expect(byType.get('deployment.unknown')).toMatchObject({
      actor: 'planfence',
      deploymentSequence: lapsing.sequence,
      data: { status: 'UNKNOWN' },
    });
    expect(byType.get('deployment.reconciled')).toMatchObject({ actor: 'reviewer' });
    expect(byType.get('environment.frozen')).toMatchObject({
      generation: null,
      sequence: null,
      planId: null,
      actor: 'admin',
      data: { name: 'prod', frozen: true, frozenReason: 'incident 7' },
    });
    expect(byType.get('environment.unfrozen')).toMatchObject({ data: { frozen: false } });
    expect(byType.get('lease.superseded')).toMatchObject({
      actor: 'agent/b',
      generation: null,
      data: { holder: 'agent/a', status: 'SUPERSEDED' },
    });
    expect(byType.get('lease.granted')).toMatchObject({
      actor: 'planfence',
      data: { holder: 'agent/b', status: 'GRANTED' },
    });
    expect(byType.get('lease.granted')!.generation).toBe(
      byType.get('lease.granted')!.data.generation,
    );
    for (const delivery of delivered) {
      expect(delivery).toMatchObject({
        webhookId: created.webhook.id,
        environment: 'prod',
        status: 'DELIVERED',
        attempts: 1,
        lastError: null,
        nextAttemptAt: null,
      });
      expect(delivery.deliveredAt).not.toBeNull();
    }

    // SLACK: one line a person reads, only the types and environments asked for.
    await allDelivered(world, slackHook.webhook.id, 2);
    expect(slack.requests.map((r) => r.event)).toEqual(['plan.published', 'environment.frozen']);
    const texts = slack.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    expect(texts[0]).toEqual({
      text: `planfence · prod: plan ${first.id} "scale &lt;!channel&gt; web" published by reviewer (generation ${generation})`,
    });
    expect(texts[1]).toEqual({ text: 'planfence · prod: frozen by admin: incident 7' });
    expect(
      verifyWebhook<{ text: string }>(
        slackHook.secret,
        slack.requests[0].headers,
        slack.requests[0].body,
      ).text,
    ).toContain('published');

    // Retention: finished deliveries and their events older than the plan retention go; a PENDING one stays.
    await receiver.stop();
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "prod", reason: "again") { name } }',
      ),
    );
    const pending = await until('the delivery to the stopped receiver to be tried', async () => {
      const [newest] = await deliveries(world, created.webhook.id);
      return (
        newest.event === 'environment.frozen' &&
        newest.attempts >= 1 &&
        newest.lastError === 'connection refused' &&
        newest
      );
    });
    expect(pending.status).toBe('PENDING');
    world.advance(2 * 86400);
    await app.get(RetentionService).purge();
    const left = await deliveries(world, created.webhook.id);
    expect(left.map((x) => x.id)).toEqual([pending.id]);
    expect(await deliveries(world, slackHook.webhook.id)).toEqual([]);
    // Its event is still there: once the receiver is back, it is delivered.
    await receiver.start();
    const redelivered = await until('the pending delivery to arrive', async () => {
      // The service clock stands still here: let the back-off of the refused attempts pass.
      world.advance(301);
      const [only] = await deliveries(world, created.webhook.id);
      return only.status === 'DELIVERED' && only;
    });
    expect(redelivered.id).toBe(pending.id);
    const last = receiver.accepted().at(-1)!;
    expect(last.delivery).toBe(pending.id);
    expect(JSON.parse(last.body)).toMatchObject({
      type: 'environment.frozen',
      data: { frozenReason: 'again' },
    });
  });
});

describe('200 concurrent decisions across 3 environments', () => {
  let app: TestApp;
  let world: World;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    app = await startApp({ PLANFENCE_WEBHOOK_POLL_MS: '50', PLANFENCE_WEBHOOK_CONCURRENCY: '3' });
    world = new World(app);
  });
  afterAll(async () => {
    await app.close();
    await receiver.stop();
  });

  // proves: R22, R23
  test('each environment hears its events once, in commit order; a filtered webhook hears only its own', async () => {
    const all = ok(
      await createWebhook(world, { url: receiver.url, events: [...EVENT_TYPES] }),
    ).createWebhook;
    const filtered = ok(
      await createWebhook(world, {
        url: `${receiver.url}?only=e1`,
        events: ['plan.published'],
        environments: ['e1'],
      }),
    ).createWebhook;
    const agents = await Promise.all(['a1', 'a2', 'a3'].map((name) => world.issue(name, 'AGENT')));
    const reviewer = await world.issue('reviewer', 'REVIEWER');
    await world.createEnvironment('e1', 'MONOTONIC', false);
    await world.createEnvironment('e2', 'MONOTONIC', false);
    await world.createEnvironment('e3', 'MONOTONIC', true);
    const generations = await Promise.all(
      ['e1', 'e2', 'e3'].map((env, i) => world.acquire(agents[i], env)),
    );
    // e3 needs approval: a few proposals there first, approved among the concurrent decisions.
    const proposals = [];
    for (let i = 0; i < 10; i++)
      proposals.push(await world.submitOk(agents[2], 'e3', generations[2], `e3 proposal ${i}`));
    const decisions: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      const which = i % 3;
      const env = ['e1', 'e2', 'e3'][which];
      if (which === 2 && i % 6 === 2) {
        // Approvals race each other: the pointer moves only forward, so some are refused.
        decisions.push(world.approve(reviewer, proposals[((i / 6) % 10) | 0].id));
      } else {
        decisions.push(world.submit(agents[which], env, generations[which], `${env} plan ${i}`));
      }
    }
    const outcomes = (await Promise.all(decisions)) as { errors?: unknown[] }[];
    expect(outcomes.filter((o) => !o.errors).length).toBeGreaterThan(150);

    // The commit order of each environment: its plans' events as the outbox numbered them,
    // which for publications is (generation, sequence) order.
    const perEnvironment = new Map<string, WebhookEvent[]>();
    // The receiver's count moves while deliveries flow: a slow machine is waited for.
    const arrived = { progress: () => receiver.requests.length };
    const expectedCount = await until(
      'every delivery of the first webhook',
      async () => {
        const list = await deliveries(world, all.webhook.id);
        return list.every((d) => d.status === 'DELIVERED') && list.length;
      },
      arrived,
    );
    await until(
      'every delivery of the filtered webhook',
      async () => {
        const list = await deliveries(world, filtered.webhook.id);
        return list.every((d) => d.status === 'DELIVERED') && list.length;
      },
      arrived,
    );
    const received = receiver.accepted().map((r) => ({ r, e: JSON.parse(r.body) as WebhookEvent }));
    const allRequests = received.filter(({ r }) => r.path === '/hooks');
    const filteredRequests = received.filter(({ r }) => r.path === '/hooks?only=e1');
    expect(allRequests.length).toBe(expectedCount);
    expect(new Set(allRequests.map(({ r }) => r.delivery)).size).toBe(expectedCount);
    for (const { e } of allRequests) {
      const list = perEnvironment.get(e.environment) ?? [];
      list.push(e);
      perEnvironment.set(e.environment, list);
    }
    expect([...perEnvironment.keys()].sort()).toEqual(['e1', 'e2', 'e3']);
    for (const [env, events] of perEnvironment) {
      const ids = events.map((e) => Number(e.id));
      // Received in the order of the outbox ids, which is commit order...
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      // ...and each publication's token is above the one before it (the pointer's order).
      const published = events.filter((e) => e.type === 'plan.published');
      for (let i = 1; i < published.length; i++) {
        const [a, b] = [published[i - 1], published[i]];
        expect(
          b.generation! > a.generation! ||
            (b.generation === a.generation && b.sequence! > a.sequence!),
        ).toBe(true);
      }
      // Submissions too: each plan's sequence is drawn in commit order.
      const submittedTokens = events.filter((e) => e.type === 'plan.submitted');
      for (let i = 1; i < submittedTokens.length; i++) {
        const [a, b] = [submittedTokens[i - 1], submittedTokens[i]];
        expect(
          b.generation! > a.generation! ||
            (b.generation === a.generation && b.sequence! > a.sequence!),
        ).toBe(true);
      }
      // Every publication the environment shows was announced once.
      const plans = await world.plans(env);
      const everPublished = plans.filter((p) => p.publishedAt !== null).map((p) => p.id);
      expect(published.map((e) => e.planId).sort()).toEqual(everPublished.sort());
      const submitted = events.filter((e) => e.type === 'plan.submitted').map((e) => e.planId);
      expect(submitted.sort()).toEqual(plans.map((p) => p.id).sort());
    }
    // The filtered webhook: e1's publications only, in order.
    expect(filteredRequests.length).toBe(
      perEnvironment.get('e1')!.filter((e) => e.type === 'plan.published').length,
    );
    expect(
      filteredRequests.every(({ e }) => e.environment === 'e1' && e.type === 'plan.published'),
    ).toBe(true);
    expect(filteredRequests.map(({ e }) => e.id)).toEqual(
      perEnvironment
        .get('e1')!
        .filter((e) => e.type === 'plan.published')
        .map((e) => e.id),
    );

    // Deleting a webhook removes it and its deliveries.
    expect(
      ok(
        await world.gql(world.admin, 'mutation($id: ID!) { deleteWebhook(id: $id) }', {
          id: filtered.webhook.id,
        }),
      ),
    ).toEqual({ deleteWebhook: true });
    expect(
      codeOf(
        await world.gql(world.admin, 'mutation($id: ID!) { deleteWebhook(id: $id) }', {
          id: filtered.webhook.id,
        }),
      ),
    ).toBe('NOT_FOUND');
    expect(
      codeOf(
        await world.gql(
          world.admin,
          `query($id: ID!) { webhookDeliveries(webhookId: $id) { id } }`,
          { id: filtered.webhook.id },
        ),
      ),
    ).toBe('NOT_FOUND');
    const remaining = ok(
      await world.gql<{ webhooks: { id: string }[] }>(world.admin, '{ webhooks { id } }'),
    ).webhooks;
    expect(remaining.map((w) => w.id)).toEqual([all.webhook.id]);
  });
});

describe('a receiver that is down', () => {
  let app: TestApp;
  let world: World;
  let receiver: Receiver;
  const backoff = {
    PLANFENCE_WEBHOOK_POLL_MS: '50',
    PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '40',
    PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '300',
  };

  afterEach(async () => {
    await app.close();
    await receiver.stop();
  });

  // proves: R23
  test('503s and connection refused: retries back off, the line waits, then everything arrives once, in order', async () => {
    receiver = await new Receiver().start();
    receiver.answer = () => 503;
    app = await startApp({ ...backoff, PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '1000' }, null);
    world = new World(app);
    const hook = ok(
      await createWebhook(world, { url: receiver.url, events: ['plan.submitted'] }),
    ).createWebhook;
    const agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('prod', 'MONOTONIC');
    const generation = await world.acquire(agent, 'prod', 600);
    const plans = [];
    for (let i = 0; i < 5; i++)
      plans.push(await world.submitOk(agent, 'prod', generation, `p${i}`));

    // The head of the line is retried; the deliveries after it wait (nothing out of order).
    // (The list is empty until the dispatcher's first look has queued the deliveries.)
    const headOf = async () => (await deliveries(world, hook.webhook.id)).at(-1);
    const earlier = await until('a failed attempt of the first delivery', async () => {
      const head = await headOf();
      return head && head.attempts >= 1 && head.lastError === 'HTTP 503' && head;
    });
    const later = await until('two more attempts', async () => {
      const head = await headOf();
      return head && head.attempts >= earlier.attempts + 2 && head;
    });
    // Attempts grow and the next attempt moves on.
    expect(Date.parse(later.lastAttemptAt!)).toBeGreaterThan(Date.parse(earlier.lastAttemptAt!));
    expect(later.nextAttemptAt).not.toBe(earlier.nextAttemptAt);
    const list = await deliveries(world, hook.webhook.id);
    const head = list.at(-1)!;
    expect(head).toMatchObject({ id: earlier.id, status: 'PENDING', lastError: 'HTTP 503' });
    expect(head.nextAttemptAt).not.toBeNull();
    expect(list.slice(0, -1).every((d) => d.attempts === 0 && d.status === 'PENDING')).toBe(true);
    expect(new Set(receiver.requests.map((r) => r.delivery))).toEqual(new Set([head.id]));

    // While the receiver is down the service stays ready and the lag shows.
    expect((await fetch(`${app.url}/health`)).status).toBe(200);
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toMatch(/planfence_webhook_deliveries_total\{outcome="retry"\} [1-9]/);
    expect(Number(/^planfence_outbox_lag_seconds (\S+)$/m.exec(metrics)![1])).toBeGreaterThan(0);
    expect(metrics).toMatch(/^planfence_webhook_deliveries_pending 5$/m);

    // Now nobody listens at all.
    const before = head.attempts;
    await receiver.stop();
    const refused = await until('an attempt refused', async () => {
      const first = (await deliveries(world, hook.webhook.id)).at(-1)!;
      return first.lastError === 'connection refused' && first.attempts > before + 1 && first;
    });
    expect(refused.status).toBe('PENDING');

    receiver.answer = () => 200;
    await receiver.start();
    const done = await allDelivered(world, hook.webhook.id, 5);
    const accepted = receiver.accepted();
    expect(accepted.map((r) => r.delivery)).toEqual(done.map((d) => d.id).reverse());
    expect(accepted.map((r) => (JSON.parse(r.body) as WebhookEvent).planId)).toEqual(
      plans.map((p) => p.id),
    );
    // Retries carried the same delivery id; every request after the first success is a new one.
    expect(
      receiver.requests.filter((r) => r.status === 503).every((r) => r.delivery === head.id),
    ).toBe(true);
    expect(await fetch(`${app.url}/metrics`).then((r) => r.text())).toMatch(
      /planfence_webhook_deliveries_total\{outcome="delivered"\} 5/,
    );
  });

  // proves: R23
  test('after the last attempt a delivery is FAILED, the line goes on, and redeliverWebhook delivers it with the same id', async () => {
    receiver = await new Receiver().start();
    receiver.answer = () => 503;
    app = await startApp({ ...backoff, PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '3' }, null);
    world = new World(app);
    const hook = ok(
      await createWebhook(world, {
        url: receiver.url,
        events: ['environment.frozen', 'environment.unfrozen'],
      }),
    ).createWebhook;
    await world.createEnvironment('prod', 'MONOTONIC');
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "prod", reason: "r") { name } }',
      ),
    );
    ok(
      await world.gql(
        world.admin,
        'mutation { unfreezeEnvironment(environment: "prod") { name } }',
      ),
    );

    const failed = await until('both deliveries FAILED', async () => {
      const list = await deliveries(world, hook.webhook.id, 'FAILED');
      return list.length === 2 && list;
    });
    for (const delivery of failed) {
      expect(delivery).toMatchObject({
        attempts: 3,
        lastError: 'HTTP 503',
        nextAttemptAt: null,
        deliveredAt: null,
      });
    }
    expect(await deliveries(world, hook.webhook.id, 'PENDING')).toEqual([]);
    expect(await deliveries(world, hook.webhook.id, 'DELIVERED')).toEqual([]);
    // The first was given up before the second was tried (order held while failing).
    const order = receiver.requests.map((r) => r.delivery);
    const [second, first] = failed;
    expect(order).toEqual([first.id, first.id, first.id, second.id, second.id, second.id]);

    receiver.answer = () => 200;
    const again = ok(
      await world.gql<{ redeliverWebhook: WebhookDelivery }>(
        world.admin,
        `mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { ${DELIVERY_FIELDS} } }`,
        { id: first.id },
      ),
    ).redeliverWebhook;
    expect(again).toMatchObject({ id: first.id, status: 'PENDING', attempts: 0 });
    const delivered = await until('the redelivery', async () => {
      const [d] = await deliveries(world, hook.webhook.id, 'DELIVERED');
      return d;
    });
    expect(delivered).toMatchObject({ id: first.id, attempts: 1, lastError: null });
    expect(receiver.accepted().map((r) => r.delivery)).toEqual([first.id]);
    expect(receiver.accepted()[0].event).toBe('environment.frozen');
    expect((await deliveries(world, hook.webhook.id, 'FAILED')).map((d) => d.id)).toEqual([
      second.id,
    ]);
    expect(
      codeOf(
        await world.gql(world.admin, 'mutation { redeliverWebhook(deliveryId: "999999") { id } }'),
      ),
    ).toBe('NOT_FOUND');
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toMatch(/planfence_webhook_deliveries_total\{outcome="failed"\} 2/);
  });
});

describe('a receiver that redirects or hangs', () => {
  // proves: R23
  test('a redirect is not followed and a slow answer times out: both are failed attempts', async () => {
    const redirecting = await new Receiver().start();
    redirecting.answer = () => 302;
    const hanging = await new Receiver().start();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    hanging.hold = () => held;
    const app = await startApp(
      {
        PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '1',
        // Long enough for the redirect's answer on a loaded machine: a shorter time-out could
        // end that attempt too, as a time-out instead of the redirect it must record.
        PLANFENCE_WEBHOOK_TIMEOUT_MS: '2000',
        PLANFENCE_WEBHOOK_POLL_MS: '50',
      },
      null,
    );
    try {
      const world = new World(app);
      const events = ['environment.frozen'];
      const toRedirect = ok(
        await createWebhook(world, { url: redirecting.url, events }),
      ).createWebhook;
      const toHang = ok(await createWebhook(world, { url: hanging.url, events })).createWebhook;
      await world.createEnvironment('prod', 'MONOTONIC');
      ok(
        await world.gql(
          world.admin,
          'mutation { freezeEnvironment(environment: "prod", reason: "r") { name } }',
        ),
      );
      const [redirected] = await until('the redirected delivery FAILED', async () => {
        const list = await deliveries(world, toRedirect.webhook.id, 'FAILED');
        return list.length === 1 && list;
      });
      expect(redirected).toMatchObject({ attempts: 1, lastError: 'HTTP 302' });
      expect(redirecting.requests).toHaveLength(1);
      const [timedOut] = await until('the hanging delivery FAILED', async () => {
        const list = await deliveries(world, toHang.webhook.id, 'FAILED');
        return list.length === 1 && list;
      });
      expect(timedOut).toMatchObject({ attempts: 1, lastError: 'timed out after 2000 ms' });
    } finally {
      release();
      await app.close();
      await redirecting.stop();
      await hanging.stop();
    }
  });
});

describe('claims', () => {
  // proves: R23
  test('a delivery in flight is claimed for the request time-out plus PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS', async () => {
    const hanging = await new Receiver().start();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let arrived = false;
    hanging.hold = () => {
      arrived = true;
      return held;
    };
    const app = await startApp({
      PLANFENCE_WEBHOOK_TIMEOUT_MS: '2000',
      PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS: '3000',
      PLANFENCE_WEBHOOK_POLL_MS: '50',
    });
    try {
      const world = new World(app);
      const { createWebhook: created } = ok(
        await createWebhook(world, { url: hanging.url, events: ['environment.frozen'] }),
      );
      await world.createEnvironment('prod', 'MONOTONIC');
      ok(
        await world.gql(
          world.admin,
          'mutation { freezeEnvironment(environment: "prod", reason: "r") { name } }',
        ),
      );
      await until('the request is in flight', () => arrived);
      const [claim] = await app.app
        .get(Database)
        .read((m) =>
          select<{ claimed_until: number | string }>(
            m,
            'SELECT claimed_until FROM webhook_deliveries WHERE webhook_id = :id',
            { id: created.webhook.id },
          ),
        );
      // The test's clock stands still: the claim was made at its time.
      expect(Number(claim.claimed_until)).toBe((await app.clock.now()) + 2000 + 3000);
    } finally {
      release();
      await app.close();
      await hanging.stop();
    }
  });
});

describe('administration', () => {
  let app: TestApp;
  let world: World;

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
  });
  afterAll(() => app.close());

  test.each([
    ['an ftp URL', { url: 'ftp://example.com/hook', events: ['plan.published'] }, 'http or https'],
    ['a URL that does not parse', { url: 'not a url', events: ['plan.published'] }, 'absolute'],
    [
      'credentials in the URL',
      { url: 'https://u:p@example.com/', events: ['plan.published'] },
      'credentials',
    ],
    [
      'a URL over 2048 characters',
      { url: `https://example.com/${'a'.repeat(2048)}`, events: ['plan.published'] },
      '2048',
    ],
    [
      'an unknown event type',
      { url: 'https://example.com/', events: ['plan.eaten'] },
      'plan.eaten',
    ],
    ['no event type', { url: 'https://example.com/', events: [] }, 'at least one'],
    [
      'an event type twice',
      { url: 'https://example.com/', events: ['plan.published', 'plan.published'] },
      'twice',
    ],
    [
      'a bad environment pattern',
      { url: 'https://example.com/', events: ['plan.published'], environments: ['Prod!'] },
      'Prod!',
    ],
    [
      'an empty environment list',
      { url: 'https://example.com/', events: ['plan.published'], environments: [] },
      'null',
    ],
  ])('%s is BAD_USER_INPUT and creates nothing', async (_, input, message) => {
    const result = await createWebhook(world, input);
    expect(codeOf(result)).toBe('BAD_USER_INPUT');
    expect(result.errors![0].message).toContain(message);
    expect(
      ok(await world.gql<{ webhooks: unknown[] }>(world.admin, '{ webhooks { id } }')).webhooks,
    ).toEqual([]);
  });

  test('only an unlimited ADMIN manages webhooks', async () => {
    const input = { url: 'https://example.com/', events: ['plan.published'] };
    for (const role of ['AGENT', 'REVIEWER', 'DEPLOYER', 'VIEWER'] as const) {
      const token = await world.issue(`someone-${role.toLowerCase()}`, role);
      expect(codeOf(await createWebhook(world, input, token))).toBe('FORBIDDEN');
      expect(codeOf(await world.gql(token, '{ webhooks { id } }'))).toBe('FORBIDDEN');
      expect(codeOf(await world.gql(token, 'mutation { deleteWebhook(id: "x") }'))).toBe(
        'FORBIDDEN',
      );
      expect(
        codeOf(await world.gql(token, 'mutation { redeliverWebhook(deliveryId: "1") { id } }')),
      ).toBe('FORBIDDEN');
      expect(codeOf(await world.gql(token, '{ webhookDeliveries(webhookId: "x") { id } }'))).toBe(
        'FORBIDDEN',
      );
    }
    const scoped = ok(
      await world.gql<{ issueToken: { token: string } }>(
        world.admin,
        'mutation { issueToken(name: "prod-admin", role: ADMIN, environments: ["prod"]) { token } }',
      ),
    ).issueToken.token;
    expect(codeOf(await createWebhook(world, { ...input, environments: ['prod'] }, scoped))).toBe(
      'FORBIDDEN',
    );
    expect(codeOf(await world.gql(scoped, '{ webhooks { id } }'))).toBe('FORBIDDEN');
    expect(
      ok(await world.gql<{ webhooks: unknown[] }>(world.admin, '{ webhooks { id } }')).webhooks,
    ).toEqual([]);
    expect(codeOf(await world.gql(world.admin, 'mutation { deleteWebhook(id: "nope") }'))).toBe(
      'NOT_FOUND',
    );
  });
});

describe('the example receiver', () => {
  let app: TestApp;
  let world: World;
  let server: Server;

  beforeAll(async () => {
    app = await startApp({ PLANFENCE_WEBHOOK_POLL_MS: '50' });
    world = new World(app);
  });
  afterAll(async () => {
    await app.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  // proves: R23
  test('verifies, acts once per delivery id, and ignores a publication below the highest it acted on', async () => {
    const acted: WebhookEvent[] = [];
    const state = {
      seen: new Set<string>(),
      published: new Map<string, { generation: number; sequence: number }>(),
    };
    // A free port for the webhook's URL, then the receiver with the secret on it.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const url = `http://127.0.0.1:${port}/`;
    const hook = ok(await createWebhook(world, { url, events: ['plan.published'] })).createWebhook;
    server = createReceiver(
      hook.secret,
      (event) => {
        acted.push(event);
        return Promise.resolve();
      },
      state,
    );
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const agent = await world.issue('agent', 'AGENT');
    const plans = await new Deployments(world).environmentWithPlans('prod', agent, 2);
    const delivered = await allDelivered(world, hook.webhook.id, 2);
    expect(acted.map((e) => e.planId)).toEqual(plans);

    // A redelivery carries the same delivery id: delivered again, not acted on again.
    const first = delivered.at(-1)!;
    ok(
      await world.gql(
        world.admin,
        'mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { id } }',
        { id: first.id },
      ),
    );
    // (It is PENDING from the mutation's commit on, so "all DELIVERED" means sent again.)
    await allDelivered(world, hook.webhook.id, 2);
    expect(acted.map((e) => e.planId)).toEqual(plans);

    // A late, older publication under a new delivery id is fenced out by its token.
    const late = { ...acted[0], id: '1' };
    expect(
      await handle(state, 'another-delivery', late, () => Promise.reject(new Error('acted'))),
    ).toBe('stale');
    // A wrong signature is 401 and nothing is acted on.
    const refused = await fetch(url, {
      method: 'POST',
      headers: { 'planfence-signature': 't=1,v1=00' },
      body: '{}',
    });
    expect(refused.status).toBe(401);
    expect(acted).toHaveLength(2);
  });
});

describe('a restart', () => {
  // proves: R22, R23
  test('a shutdown waits for the request in flight; deliveries still pending are sent after the restart, in order', async () => {
    const database = await scratchDatabase(true);
    const receiver = await new Receiver().start();
    // The first request is answered only once the service has begun to shut down.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = true;
    const env = { DATABASE_URL: database.url, PLANFENCE_WEBHOOK_POLL_MS: '50' };
    let app = await startApp(env, null);
    try {
      const world = new World(app);
      const hook = ok(
        await createWebhook(world, {
          url: receiver.url,
          events: ['environment.frozen', 'environment.unfrozen'],
        }),
      ).createWebhook;
      receiver.hold = async () => {
        if (!holding) return;
        holding = false;
        await held;
      };
      await world.createEnvironment('prod', 'MONOTONIC');
      ok(
        await world.gql(
          world.admin,
          'mutation { freezeEnvironment(environment: "prod", reason: "one") { name } }',
        ),
      );
      await until('the first request to be in flight', () => !holding);
      ok(
        await world.gql(
          world.admin,
          'mutation { unfreezeEnvironment(environment: "prod") { name } }',
        ),
      );
      ok(
        await world.gql(
          world.admin,
          'mutation { freezeEnvironment(environment: "prod", reason: "two") { name } }',
        ),
      );
      const closing = app.close();
      release();
      await closing;
      expect(receiver.accepted().map((r) => r.event)).toEqual(['environment.frozen']);

      app = await startApp(env, null);
      const again = new World(app);
      const done = await allDelivered(again, hook.webhook.id, 3);
      expect(done.every((d) => d.attempts === 1)).toBe(true);
      expect(receiver.accepted().map((r) => r.delivery)).toEqual(done.map((d) => d.id).reverse());
      expect(receiver.accepted().map((r) => (JSON.parse(r.body) as WebhookEvent).type)).toEqual([
        'environment.frozen',
        'environment.unfrozen',
        'environment.frozen',
      ]);
    } finally {
      await app.close();
      await receiver.stop();
      // A scratch database that cannot be dropped at once must not hide the test's own outcome.
      await database.cleanup().catch((error: unknown) => console.warn(`cleanup: ${String(error)}`));
    }
  });
});
