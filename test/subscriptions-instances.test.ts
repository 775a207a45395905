/**
 * Subscriptions across instances (two services on one PostgreSQL database hear the same
 * events, once, in commit order) and cursors (`after`: a subscriber that reconnects first
 * receives what it missed, then the live events, with no gap and nothing twice), on both
 * databases where it applies.
 */
import { PgListener } from '../src/database/pg-listener.js';
import {
  ADMIN_TOKEN,
  scratchDatabase,
  startApp,
  TEST_DATABASE,
  type TestApp,
} from './support/app.js';
import { DEPLOYMENT_FIELDS, Deployments } from './support/deployers.js';
import { RawSocket } from './support/raw-socket.js';
import { codeOf, ok, World } from './support/world.js';

const PLAN_SELECTION =
  'id environment generation sequence status title content contentHash submittedBy submittedAt basedOnPlanId reviewedBy reviewedAt rejectionReason publishedAt expiresAt approvals { approver contentHash } pendingApprovalRules { count }';
const AUDIT_SELECTION = 'id at environment actor action generation planId outcome code detail';

const PLANS = `subscription($e: String!, $after: ID) { planPublished(environment: $e, after: $after) { ${PLAN_SELECTION} } }`;
const AUDIT = `subscription($e: String!, $after: ID) { auditEventRecorded(environment: $e, after: $after) { ${AUDIT_SELECTION} } }`;
const DEPLOYMENTS = `subscription($e: String!, $after: ID) { deploymentChanged(environment: $e, after: $after) { ${DEPLOYMENT_FIELDS} } }`;

let subscriptions = 0;

/** One subscription on its own socket: what it delivered, in the order received. */
class Feed {
  private constructor(
    readonly socket: RawSocket,
    readonly id: string,
    readonly field: string,
  ) {}

  static async open(
    app: TestApp,
    token: string,
    query: string,
    variables: Record<string, unknown>,
  ): Promise<Feed> {
    const socket = await RawSocket.admitted(app, token);
    const id = `s${++subscriptions}`;
    socket.subscribe(id, query, variables);
    return new Feed(socket, id, /\{\s*(\w+)\(/.exec(query)![1]);
  }

  get items(): any[] {
    return this.socket.frames
      .filter((f) => f.type === 'next' && f.id === this.id)
      .map((f) => {
        expect(f.payload.errors).toBeUndefined();
        return f.payload.data[this.field];
      });
  }

  get errors(): any[] {
    return this.socket.frames
      .filter((f) => f.type === 'error' && f.id === this.id)
      .flatMap((f) => f.payload as any[]);
  }

  /** The first `n` items, once they have arrived (fails when the subscription ends first). */
  async take(n: number): Promise<any[]> {
    await this.socket.next(() => this.items.length >= n || this.errors.length > 0);
    expect(this.errors).toEqual([]);
    return this.items.slice(0, n);
  }

  /** Waits until an item satisfies `match`; returns every item received by then. */
  async until(match: (item: any) => boolean): Promise<any[]> {
    await this.socket.next(() => this.items.some(match) || this.errors.length > 0);
    expect(this.errors).toEqual([]);
    return this.items;
  }

  /** The error the subscription ended with. */
  async error(): Promise<any> {
    await this.socket.next(() => this.errors.length > 0 || this.items.length > 0);
    expect(this.items).toEqual([]);
    return this.errors[0];
  }
}

afterAll(() => RawSocket.terminateAll());

const position = (p: { generation: number; sequence: number }) => [p.generation, p.sequence];
const ascending = (plans: { generation: number; sequence: number }[]) =>
  plans.every((q, i) => {
    if (i === 0) return true;
    const [pg, ps] = position(plans[i - 1]);
    const [qg, qs] = position(q);
    return qg > pg || (qg === pg && qs > ps);
  });

(TEST_DATABASE === 'postgres' ? describe : describe.skip)(
  'two instances on one PostgreSQL database',
  () => {
    let database: { url: string; cleanup: () => Promise<void> };
    let one: TestApp;
    let two: TestApp;
    let w1: World;
    let w2: World;
    let viewer: string;
    let agent: string;

    beforeAll(async () => {
      database = await scratchDatabase(true);
      // Sockets are re-checked only on signals here, not by the periodic backstop.
      const env = { DATABASE_URL: database.url, PLANFENCE_WS_RECHECK_SECONDS: '3600' };
      one = await startApp(env);
      two = await startApp(env);
      w1 = new World(one);
      w2 = new World(two);
      viewer = await w1.issue('viewer', 'VIEWER');
      agent = await w1.issue('agent', 'AGENT');
    });
    afterAll(async () => {
      RawSocket.terminateAll();
      await two.close();
      await one.close();
      await database.cleanup();
    });

    // proves: R24
    test("a subscriber on instance 2 hears the publications made through instance 1, once each, in order, as instance 1's subscribers do", async () => {
      await w1.createEnvironment('live', 'MONOTONIC', false);
      const g = await w1.acquire(agent, 'live', 600);
      const seed = await w1.submitOk(agent, 'live', g, 'seed');
      const first = await w1.submitOk(agent, 'live', g, 'first');
      // Resuming after the seed: the first plan arrives once the subscription is in place.
      const here = await Feed.open(one, viewer, PLANS, { e: 'live', after: seed.id });
      const there = await Feed.open(two, viewer, PLANS, { e: 'live', after: seed.id });
      expect((await there.take(1)).map((p) => p.id)).toEqual([first.id]);
      await here.take(1);

      // Large contents travel by id; every plan is superseded by the next before it is read.
      const contents = [1, 2, 3, 4, 5].map((i) => `${i}`.repeat(20_000 + i));
      const published = [first];
      for (const content of contents) published.push(await w1.submitOk(agent, 'live', g, content));
      const sentinel = await w1.submitOk(agent, 'live', g, 'sentinel');

      const heardThere = await there.until((p) => p.id === sentinel.id);
      const heardHere = await here.until((p) => p.id === sentinel.id);
      expect(heardThere.map((p) => p.id)).toEqual([...published, sentinel].map((p) => p.id));
      expect(heardThere).toEqual(heardHere);
      expect(heardThere.map((p) => p.status)).toEqual(Array(7).fill('PUBLISHED'));
      expect(heardThere.slice(1, 6).map((p) => p.content)).toEqual(contents);
      expect(heardThere[3]).toMatchObject({
        ...published[3],
        status: 'PUBLISHED',
        approvals: [],
        pendingApprovalRules: [],
      });
    });

    // proves: R24
    test("an approval through instance 2 reaches instance 1's subscribers with the plan as the approval answered it", async () => {
      const reviewer = await w1.issue('reviewer', 'REVIEWER');
      await w1.createEnvironment('reviewed', 'STRICT');
      const g = await w1.acquire(agent, 'reviewed', 600);
      const approve = (planId: string) =>
        w2.gql<{ approvePlan: any }>(
          reviewer,
          `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN_SELECTION} } }`,
          { input: { planId } },
        );
      const seed = await w2.submitOk(agent, 'reviewed', g, 'seed');
      ok(await approve(seed.id));
      const plans = await Feed.open(one, viewer, PLANS, { e: 'reviewed', after: seed.id });
      const proposed = await w2.submitOk(agent, 'reviewed', g, 'needs a look');
      const approved = ok(await approve(proposed.id)).approvePlan;
      const [heard] = await plans.take(1);
      expect(heard).toEqual(approved);
      expect(heard.approvals.map((a: { approver: string }) => a.approver)).toEqual(['reviewer']);
    });

    // proves: R6, R24
    test("publications through both instances at once: every instance's subscribers hear the same sequence, the order of the pointer's moves", async () => {
      await w1.createEnvironment('race', 'MONOTONIC', false);
      const g = await w1.acquire(agent, 'race', 600);
      const seed = await w1.submitOk(agent, 'race', g, 'seed');
      const first = await w2.submitOk(agent, 'race', g, 'first');
      const feeds = [
        await Feed.open(one, viewer, PLANS, { e: 'race', after: seed.id }),
        await Feed.open(two, viewer, PLANS, { e: 'race', after: seed.id }),
        await Feed.open(two, viewer, PLANS, { e: 'race', after: seed.id }),
      ];
      for (const feed of feeds) await feed.take(1);

      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (i % 2 ? w1 : w2).submitOk(agent, 'race', g, `concurrent ${i}`),
        ),
      );
      const sentinel = await w1.submitOk(agent, 'race', g, 'sentinel');
      const heard = await Promise.all(feeds.map((f) => f.until((p) => p.id === sentinel.id)));

      const moves = heard[0].map((p) => p.id);
      expect(heard[1].map((p) => p.id)).toEqual(moves);
      expect(heard[2].map((p) => p.id)).toEqual(moves);
      expect(heard[1]).toEqual(heard[0]);
      expect([...moves].sort()).toEqual([first, ...results, sentinel].map((p) => p.id).sort());
      expect(ascending(heard[0])).toBe(true);
      expect((await w2.environment('race')).currentPlan?.id).toBe(sentinel.id);
    });

    // proves: R24
    test("audit events and deployment changes made through either instance reach both instances' subscribers in the same order", async () => {
      const deployer = await w1.issue('deployer', 'DEPLOYER');
      const d1 = new Deployments(w1);
      const d2 = new Deployments(w2);
      const [plan] = await d1.environmentWithPlans('ship', agent, 1);
      const started = await d1.startOk(deployer, 'ship', plan);
      const [firstEvent] = (await w1.auditEvents('ship')).slice(-1);

      const audits = [
        await Feed.open(one, viewer, AUDIT, { e: 'ship', after: firstEvent.id }),
        await Feed.open(two, viewer, AUDIT, { e: 'ship', after: firstEvent.id }),
      ];
      const changes = [
        await Feed.open(one, viewer, DEPLOYMENTS, { e: 'ship', after: started.id }),
        await Feed.open(two, viewer, DEPLOYMENTS, { e: 'ship', after: started.id }),
      ];
      for (const feed of [...audits, ...changes]) await feed.take(1);

      // A detail of 12 KB of UTF-8 does not fit in a notification: it is read by id.
      const detail = '€'.repeat(4096);
      ok(await d2.finish(deployer, started.id, 'SUCCEEDED', { detail }));
      const second = await d2.startOk(deployer, 'ship', plan);
      const failed = ok(await d1.finish(deployer, second.id, 'FAILED', { detail: 'exit 1' }));
      expect(codeOf(await d2.finish(deployer, second.id, 'FAILED'))).toBe('DEPLOYMENT_NOT_ACTIVE');

      const heard = await Promise.all(changes.map((f) => f.take(4)));
      expect(heard[1]).toEqual(heard[0]);
      expect(heard[0].map((d) => [d.id, d.status])).toEqual([
        [started.id, 'IN_PROGRESS'],
        [started.id, 'SUCCEEDED'],
        [second.id, 'IN_PROGRESS'],
        [second.id, 'FAILED'],
      ]);
      expect(heard[0][1].detail).toBe(detail);
      expect(heard[0][3]).toEqual(failed.finishDeployment);

      const table = (await w2.auditEvents('ship')).filter(
        (e) => Number(e.id) > Number(firstEvent.id),
      );
      const rejected = table.find((e) => e.code === 'DEPLOYMENT_NOT_ACTIVE')!;
      const logged = await Promise.all(audits.map((f) => f.until((e) => e.id === rejected.id)));
      expect(logged[1]).toEqual(logged[0]);
      expect(logged[0].map((e) => e.id).sort()).toEqual(table.map((e) => e.id).sort());
      expect(logged[0].find((e) => e.id === rejected.id)).toMatchObject(rejected);
    });

    // proves: R24
    test('when a lost LISTEN connection is back, its open subscriptions complete; resumed with after, they miss nothing', async () => {
      await w1.createEnvironment('flaky', 'MONOTONIC', false);
      const g = await w1.acquire(agent, 'flaky', 600);
      const seed = await w1.submitOk(agent, 'flaky', g, 'seed');
      const first = await w1.submitOk(agent, 'flaky', g, 'first');
      const feed = await Feed.open(two, viewer, PLANS, { e: 'flaky', after: seed.id });
      const other = await Feed.open(one, viewer, PLANS, { e: 'flaky', after: seed.id });
      await feed.take(1);
      await other.take(1);

      const listener = two.get(PgListener);
      await listener.dropConnection();
      expect(listener.listening).toBe(false);
      const meanwhile = [];
      for (let i = 0; i < 3; i++)
        meanwhile.push(await w1.submitOk(agent, 'flaky', g, `while ${i}`));

      // Instance 2's subscription ends once its listener is back; instance 1's goes on.
      expect(
        await feed.socket.next((f) => f.type === 'complete' && f.id === feed.id),
      ).not.toBeNull();
      expect(listener.listening).toBe(true);
      const lastHeld = feed.items.at(-1).id;
      const resumed = await Feed.open(two, viewer, PLANS, { e: 'flaky', after: lastHeld });
      const sentinel = await w1.submitOk(agent, 'flaky', g, 'sentinel');
      const all = [...feed.items, ...(await resumed.until((p) => p.id === sentinel.id))];
      const expected = [first, ...meanwhile, sentinel].map((p) => p.id);
      expect(all.map((p) => p.id)).toEqual(expected);
      expect((await other.until((p) => p.id === sentinel.id)).map((p) => p.id)).toEqual(expected);
      expect(other.socket.frames.some((f) => f.type === 'complete')).toBe(false);
    });

    // proves: R26
    test("a revocation committed while instance 2's LISTEN connection was down closes its sockets once the connection is back", async () => {
      const doomed = await w1.issue('doomed-viewer', 'VIEWER');
      const socket = await RawSocket.admitted(two, doomed);
      const listener = two.get(PgListener);
      await listener.dropConnection();
      ok(await w1.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "doomed-viewer") { name } }'));
      expect((await socket.closed).code).toBe(4403);
      expect(listener.listening).toBe(true);
    });
  },
);

describe('cursors: a subscriber that resumes with after', () => {
  let app: TestApp;
  let world: World;
  let viewer: string;
  let agent: string;

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    viewer = await world.issue('viewer', 'VIEWER');
    agent = await world.issue('agent', 'AGENT');
  });
  afterAll(async () => {
    RawSocket.terminateAll();
    await app.close();
  });

  test('planPublished: the plans published after the cursor, then the live ones, none missed or twice while publications go on', async () => {
    await world.createEnvironment('resume', 'MONOTONIC', false);
    const g = await world.acquire(agent, 'resume', 600);
    const before = [];
    for (let i = 0; i < 5; i++)
      before.push(await world.submitOk(agent, 'resume', g, `before ${i}`));
    // Publications race the subscription's catch-up.
    const racing = Promise.all(
      Array.from({ length: 20 }, (_, i) => world.submitOk(agent, 'resume', g, `racing ${i}`)),
    );
    const feed = await Feed.open(app, viewer, PLANS, { e: 'resume', after: before[1].id });
    const during = await racing;
    const sentinel = await world.submitOk(agent, 'resume', g, 'sentinel');

    const heard = await feed.until((p) => p.id === sentinel.id);
    const expected = [...before.slice(2), ...during, sentinel].sort((p, q) =>
      p.generation === q.generation ? p.sequence - q.sequence : p.generation - q.generation,
    );
    expect(heard.map((p) => p.id)).toEqual(expected.map((p) => p.id));
    // Superseded since, each reads as its publication announced it.
    expect(new Set(heard.map((p) => p.status))).toEqual(new Set(['PUBLISHED']));
    expect(heard[0].content).toBe('before 2');
  });

  test('auditEventRecorded: the events with a larger id, then the live ones, each once', async () => {
    await world.createEnvironment('journal', 'MONOTONIC', false);
    const g = await world.acquire(agent, 'journal', 600);
    for (let i = 0; i < 4; i++) ok(await world.renew(agent, 'journal', g, 600));
    const [cursor] = (await world.auditEvents('journal')).slice(2, 3);
    const racing = Promise.all(
      Array.from({ length: 10 }, () => world.renew(agent, 'journal', g, 600)),
    );
    const feed = await Feed.open(app, viewer, AUDIT, { e: 'journal', after: cursor.id });
    await racing;
    ok(await world.release(agent, 'journal', g));

    const heard = await feed.until((e) => e.action === 'RELEASE_LEASE');
    const table = (await world.auditEvents('journal')).filter(
      (e) => Number(e.id) > Number(cursor.id),
    );
    expect(heard.map((e) => e.id).sort()).toEqual(table.map((e) => e.id).sort());
    expect(new Set(heard.map((e) => e.id)).size).toBe(heard.length);
    expect(heard.at(-1)).toMatchObject(table[0]);
  });

  test('deploymentChanged: the state of the cursor deployment and of every later one, then the live changes', async () => {
    const deployer = await world.issue('deployer', 'DEPLOYER');
    const d = new Deployments(world);
    const [plan] = await d.environmentWithPlans('rollout', agent, 1);
    const first = await d.startOk(deployer, 'rollout', plan);
    ok(await d.finish(deployer, first.id, 'SUCCEEDED', { detail: 'done' }));
    const second = await d.startOk(deployer, 'rollout', plan);

    const feed = await Feed.open(app, viewer, DEPLOYMENTS, { e: 'rollout', after: first.id });
    const caughtUp = await feed.take(2);
    expect(caughtUp.map((x) => [x.id, x.status, x.detail])).toEqual([
      [first.id, 'SUCCEEDED', 'done'],
      [second.id, 'IN_PROGRESS', null],
    ]);
    const finished = ok(await d.finish(deployer, second.id, 'FAILED', { detail: 'exit 2' }));
    const heard = await feed.take(3);
    expect(heard[2]).toEqual(finished.finishDeployment);
    const third = await d.startOk(deployer, 'rollout', plan);
    expect((await feed.take(4))[3]).toMatchObject({ id: third.id, status: 'IN_PROGRESS' });
    expect(feed.items).toHaveLength(4);
  });

  test('a cursor of another environment, or a malformed one, is refused with BAD_USER_INPUT', async () => {
    await world.createEnvironment('strict-cursor', 'MONOTONIC', false);
    const cases: [string, Record<string, unknown>][] = [
      [PLANS, { e: 'strict-cursor', after: 'elsewhere@1.1' }],
      [PLANS, { e: 'strict-cursor', after: 'not a plan id' }],
      [AUDIT, { e: 'strict-cursor', after: '-3' }],
      [DEPLOYMENTS, { e: 'strict-cursor', after: 'elsewhere#1' }],
      [DEPLOYMENTS, { e: 'strict-cursor', after: 'strict-cursor@1.1' }],
    ];
    for (const [query, variables] of cases) {
      const feed = await Feed.open(app, viewer, query, variables);
      expect((await feed.error()).extensions.code).toBe('BAD_USER_INPUT');
    }
  });
});

test('a cursor followed by more events than the replay limit is refused with CURSOR_TOO_OLD; one within it resumes', async () => {
  const app = await startApp({ PLANFENCE_SUBSCRIPTION_REPLAY_LIMIT: '3' });
  try {
    const world = new World(app);
    const agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('busy', 'MONOTONIC', false);
    const g = await world.acquire(agent, 'busy', 600);
    const plans = [];
    for (let i = 0; i < 5; i++) plans.push(await world.submitOk(agent, 'busy', g, `p${i}`));

    const tooOld = await Feed.open(app, ADMIN_TOKEN, PLANS, { e: 'busy', after: plans[0].id });
    const error = await tooOld.error();
    expect(error.extensions).toEqual({ code: 'CURSOR_TOO_OLD', replayLimit: 3 });
    expect(error.message).toMatch(/subscribe without after/);

    const recent = await Feed.open(app, ADMIN_TOKEN, PLANS, { e: 'busy', after: plans[1].id });
    expect((await recent.take(3)).map((p) => p.id)).toEqual(plans.slice(2).map((p) => p.id));
  } finally {
    RawSocket.terminateAll();
    await app.close();
  }
});
