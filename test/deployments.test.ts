/**
 * DESIGN §10 (R18–R21): deployments of the published plan, one at a time per environment,
 * each with the next deployment sequence; a lapsed heartbeat reads UNKNOWN until a
 * reviewer reconciles it, and the old starter's late report is refused.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { Database, select } from '../src/database/database.js';
import { RetentionService } from '../src/retention/retention.service.js';
import { scratchDatabase, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { codeOf, ok, World } from './support/world.js';
import { subscribed } from './support/subscribed.js';
import { until } from './support/until.js';

let app: TestApp;
let world: World;
let d: Deployments;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  d = new Deployments(world);
  tokens.agent = await world.issue('agent', 'AGENT');
  tokens.reviewer = await world.issue('reviewer', 'REVIEWER');
  tokens.viewer = await world.issue('viewer', 'VIEWER');
  for (const name of ['d1', 'd2']) tokens[name] = await world.issue(name, 'DEPLOYER');
});
afterAll(() => app.close());

/** The stored status column (what the database holds, not what reads compute). */
async function storedStatus(id: string): Promise<string> {
  const [row] = await app.app
    .get(Database)
    .read((m) =>
      select<{ status: string }>(m, 'SELECT status FROM deployments WHERE id = :id', { id }),
    );
  return row.status;
}

// proves: R18
test('a start of a plan that is not the current one is refused with PRECONDITION_FAILED {currentPlanId}', async () => {
  const [older, current] = await d.environmentWithPlans('stale', tokens.agent, 2);
  const refused = await d.start(tokens.d1, 'stale', older);
  expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
  expect(refused.errors![0].extensions).toMatchObject({ currentPlanId: current });
  expect(await d.list('stale')).toEqual([]);

  await world.createEnvironment('empty', 'MONOTONIC', false);
  const nothingPublished = await d.start(tokens.d1, 'empty', 'empty@1.1');
  expect(codeOf(nothingPublished)).toBe('PRECONDITION_FAILED');
  expect(nothingPublished.errors![0].extensions).toMatchObject({ currentPlanId: null });
  expect(codeOf(await d.start(tokens.d1, 'nowhere', 'nowhere@1.1'))).toBe('NOT_FOUND');

  const started = await d.startOk(tokens.d1, 'stale', current);
  expect(started).toMatchObject({
    id: 'stale#1',
    sequence: 1,
    status: 'IN_PROGRESS',
    startedBy: 'd1',
    plan: { id: current },
  });
});

// proves: R18, R20
test('while a deployment is IN_PROGRESS or UNKNOWN no other starts: DEPLOYMENT_ACTIVE {deploymentId, status}', async () => {
  const [plan] = await d.environmentWithPlans('busy', tokens.agent, 1);
  const first = await d.startOk(tokens.d1, 'busy', plan, 30);

  const whileRunning = await d.start(tokens.d2, 'busy', plan);
  expect(codeOf(whileRunning)).toBe('DEPLOYMENT_ACTIVE');
  expect(whileRunning.errors![0].extensions).toMatchObject({
    deploymentId: first.id,
    status: 'IN_PROGRESS',
  });

  world.advance(31);
  const whileUnknown = await d.start(tokens.d2, 'busy', plan);
  expect(codeOf(whileUnknown)).toBe('DEPLOYMENT_ACTIVE');
  expect(whileUnknown.errors![0].extensions).toMatchObject({
    deploymentId: first.id,
    status: 'UNKNOWN',
  });
  // The same deployer does not get a second one either.
  expect(codeOf(await d.start(tokens.d1, 'busy', plan))).toBe('DEPLOYMENT_ACTIVE');
  expect((await d.list('busy')).map((x) => x.id)).toEqual([first.id]);
});

// proves: R2, R18
test('50 concurrent starts by 5 deployers: exactly one is accepted, the others see it as DEPLOYMENT_ACTIVE', async () => {
  const database = await scratchDatabase(true);
  // On PostgreSQL two instances share the database; SQLite has one writer process.
  const instances = [await startApp({ DATABASE_URL: database.url })];
  if (TEST_DATABASE === 'postgres') instances.push(await startApp({ DATABASE_URL: database.url }));
  try {
    const worlds = instances.map((instance) => new World(instance));
    const local = new Deployments(worlds[0]);
    const agent = await worlds[0].issue('agent', 'AGENT');
    const deployers = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => worlds[0].issue(`deployer-${i}`, 'DEPLOYER')),
    );
    const [plan] = await local.environmentWithPlans('race', agent, 1);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        new Deployments(worlds[i % worlds.length]).start(deployers[i % 5], 'race', plan),
      ),
    );
    const codes = results.map(codeOf);
    expect(codes.filter((c) => c === 'OK')).toHaveLength(1);
    expect(codes.filter((c) => c === 'DEPLOYMENT_ACTIVE')).toHaveLength(49);
    const winner = results.find((r) => codeOf(r) === 'OK')!.data!.startDeployment;
    expect(winner).toMatchObject({ id: 'race#1', sequence: 1 });
    for (const result of results.filter((r) => codeOf(r) !== 'OK'))
      expect(result.errors![0].extensions).toMatchObject({ deploymentId: 'race#1' });
    expect((await local.list('race')).map((x) => x.id)).toEqual(['race#1']);
  } finally {
    for (const instance of instances) await instance.close();
    await database.cleanup();
  }
});

// proves: R18
test('deployment sequences go strictly +1 per accepted start and survive a restart on the same database', async () => {
  const database = await scratchDatabase(true);
  const env = { DATABASE_URL: database.url };
  try {
    const first = await startApp(env);
    const before = new Deployments(new World(first));
    const agent = await before.world.issue('agent', 'AGENT');
    const deployer = await before.world.issue('deployer', 'DEPLOYER');
    const [plan] = await before.environmentWithPlans('prod', agent, 1);
    for (let i = 1; i <= 3; i++) {
      const started = await before.startOk(deployer, 'prod', plan);
      expect(started.sequence).toBe(i);
      // A refused start takes no sequence.
      expect(codeOf(await before.start(deployer, 'prod', plan))).toBe('DEPLOYMENT_ACTIVE');
      ok(await before.finish(deployer, started.id, i % 2 ? 'SUCCEEDED' : 'FAILED'));
    }
    await first.close();

    const second = await startApp(env);
    const after = new Deployments(new World(second));
    const fourth = await after.startOk(deployer, 'prod', plan);
    expect(fourth).toMatchObject({ id: 'prod#4', sequence: 4 });
    expect((await after.list('prod')).map((x) => x.sequence)).toEqual([4, 3, 2, 1]);
    await second.close();
  } finally {
    await database.cleanup();
  }
});

// proves: R11, R19
test('a lapsed heartbeat reads UNKNOWN at the exact instant it lapses; a heartbeat in time keeps it IN_PROGRESS', async () => {
  const [plan] = await d.environmentWithPlans('lapse', tokens.agent, 1);
  const started = await d.startOk(tokens.d1, 'lapse', plan, 10);
  expect(Date.parse(started.heartbeatExpiresAt) - Date.parse(started.startedAt)).toBe(10_000);

  app.clock.advance(9_999);
  expect((await d.get(started.id))?.status).toBe('IN_PROGRESS');
  const beaten = ok(await d.heartbeat(tokens.d1, started.id, 10)).heartbeatDeployment;
  expect(beaten.status).toBe('IN_PROGRESS');

  app.clock.advance(9_999);
  expect((await d.get(started.id))?.status).toBe('IN_PROGRESS');
  app.clock.advance(1);
  expect((await d.get(started.id))?.status).toBe('UNKNOWN');
  expect((await d.environment('lapse')).activeDeployment).toMatchObject({
    id: started.id,
    status: 'UNKNOWN',
  });
  // Read at once; stored by the next write in the environment.
  expect(await storedStatus(started.id)).toBe('IN_PROGRESS');
  expect(codeOf(await d.start(tokens.d2, 'lapse', plan))).toBe('DEPLOYMENT_ACTIVE');
  expect(await storedStatus(started.id)).toBe('UNKNOWN');
  // Lapsing is planfence's own decision, audited as such.
  expect(
    (await world.auditEvents('lapse')).find((e) => e.action === 'DEPLOYMENT_LAPSED'),
  ).toMatchObject({
    actor: 'planfence',
    outcome: 'ACCEPTED',
    detail: `the heartbeat of deployment ${started.id} lapsed: its outcome is UNKNOWN`,
  });

  // A heartbeat before anyone reconciled brings it back.
  const revived = ok(await d.heartbeat(tokens.d1, started.id, 10)).heartbeatDeployment;
  expect(revived.status).toBe('IN_PROGRESS');
  expect(await storedStatus(started.id)).toBe('IN_PROGRESS');
});

// proves: R19
test("a write in one environment stores its own lapsed deployments, not another environment's", async () => {
  const [here] = await d.environmentWithPlans('lapse-here', tokens.agent, 1);
  const [there] = await d.environmentWithPlans('lapse-there', tokens.agent, 1);
  const mine = await d.startOk(tokens.d1, 'lapse-here', here, 5);
  const theirs = await d.startOk(tokens.d1, 'lapse-there', there, 5);
  app.clock.advance(5_000);

  expect(codeOf(await d.start(tokens.d2, 'lapse-here', here))).toBe('DEPLOYMENT_ACTIVE');
  expect(await storedStatus(mine.id)).toBe('UNKNOWN');
  expect(await storedStatus(theirs.id)).toBe('IN_PROGRESS');
  const lapsedIn = async (environment: string) =>
    (await world.auditEvents(environment)).filter((e) => e.action === 'DEPLOYMENT_LAPSED');
  expect(await lapsedIn('lapse-here')).toHaveLength(1);
  expect(await lapsedIn('lapse-there')).toEqual([]);

  // The other environment's next write stores its own, once.
  expect(codeOf(await d.start(tokens.d2, 'lapse-there', there))).toBe('DEPLOYMENT_ACTIVE');
  expect(await storedStatus(theirs.id)).toBe('UNKNOWN');
  expect(await lapsedIn('lapse-there')).toHaveLength(1);
  expect(await lapsedIn('lapse-here')).toHaveLength(1);
});

// proves: R19
test('the retention job stores the UNKNOWN status of lapsed deployments', async () => {
  const [plan] = await d.environmentWithPlans('retained', tokens.agent, 1);
  const started = await d.startOk(tokens.d1, 'retained', plan, 5);
  world.advance(5);
  await app.get(RetentionService).purge();
  expect(await storedStatus(started.id)).toBe('UNKNOWN');
});

// proves: R19, R20
test('only the starter reports; a reviewer reconciles an UNKNOWN deployment; the late report is refused; a new start succeeds', async () => {
  const [plan] = await d.environmentWithPlans('story', tokens.agent, 1);
  const first = await d.startOk(tokens.d1, 'story', plan, 20);

  const byOther = await d.finish(tokens.d2, first.id, 'SUCCEEDED');
  expect(codeOf(byOther)).toBe('DEPLOYMENT_NOT_ACTIVE');
  expect(byOther.errors![0].extensions).toMatchObject({ status: 'IN_PROGRESS' });
  expect(byOther.errors![0].message).toBe(
    `deployment ${first.id} was started by d1: only its starter reports on it`,
  );
  expect(codeOf(await d.heartbeat(tokens.d2, first.id))).toBe('DEPLOYMENT_NOT_ACTIVE');

  // A live deployment is not reconciled: its starter may still report.
  const tooEarly = await d.reconcile(tokens.reviewer, first.id, 'FAILED', 'looks stuck');
  expect(codeOf(tooEarly)).toBe('DEPLOYMENT_ACTIVE');
  expect(tooEarly.errors![0].extensions).toMatchObject({
    deploymentId: first.id,
    status: 'IN_PROGRESS',
  });

  world.advance(21);
  expect((await d.get(first.id))?.status).toBe('UNKNOWN');
  const reconciled = ok(
    await d.reconcile(tokens.reviewer, first.id, 'FAILED', 'the runner was lost; nothing applied'),
  ).reconcileDeployment;
  expect(reconciled).toMatchObject({
    status: 'FAILED',
    reconciledBy: 'reviewer',
    reconcileNote: 'the runner was lost; nothing applied',
  });
  expect(reconciled.finishedAt).not.toBeNull();

  const late = await d.finish(tokens.d1, first.id, 'SUCCEEDED', { detail: 'applied' });
  expect(codeOf(late)).toBe('DEPLOYMENT_NOT_ACTIVE');
  expect(late.errors![0].extensions).toMatchObject({ status: 'FAILED' });
  expect(late.errors![0].message).toBe(
    `deployment ${first.id} is already FAILED, reconciled by reviewer`,
  );
  expect(codeOf(await d.heartbeat(tokens.d1, first.id))).toBe('DEPLOYMENT_NOT_ACTIVE');
  const again = await d.reconcile(tokens.reviewer, first.id, 'SUCCEEDED', 'second thoughts');
  expect(codeOf(again)).toBe('DEPLOYMENT_NOT_ACTIVE');
  expect(await d.get(first.id)).toMatchObject({ status: 'FAILED', detail: null });

  const second = await d.startOk(tokens.d2, 'story', plan);
  expect(second).toMatchObject({ id: 'story#2', sequence: 2, startedBy: 'd2' });
  const finished = ok(
    await d.finish(tokens.d2, second.id, 'SUCCEEDED', { detail: 'applied in 3s' }),
  ).finishDeployment;
  expect(finished).toMatchObject({ status: 'SUCCEEDED', detail: 'applied in 3s' });
  const twice = await d.finish(tokens.d2, second.id, 'FAILED');
  expect(codeOf(twice)).toBe('DEPLOYMENT_NOT_ACTIVE');
  expect(twice.errors![0].message).toBe(`deployment ${second.id} is already SUCCEEDED`);

  const actions = (await world.auditEvents('story')).map((e) => `${e.action}:${e.outcome}`);
  for (const expected of [
    'START_DEPLOYMENT:ACCEPTED',
    'FINISH_DEPLOYMENT:REJECTED',
    'HEARTBEAT_DEPLOYMENT:REJECTED',
    'RECONCILE_DEPLOYMENT:REJECTED',
    'RECONCILE_DEPLOYMENT:ACCEPTED',
    'FINISH_DEPLOYMENT:ACCEPTED',
  ])
    expect(actions).toContain(expected);
});

// proves: R19
test('a late SUCCEEDED report before any reconcile is accepted', async () => {
  const [plan] = await d.environmentWithPlans('late-ok', tokens.agent, 1);
  const started = await d.startOk(tokens.d1, 'late-ok', plan, 5);
  world.advance(60);
  expect((await d.get(started.id))?.status).toBe('UNKNOWN');
  expect(ok(await d.finish(tokens.d1, started.id, 'SUCCEEDED')).finishDeployment.status).toBe(
    'SUCCEEDED',
  );
  expect((await d.environment('late-ok')).deployedPlan).toEqual({ id: plan });
});

// proves: R9, R21
test('start and finish replay their first outcome under the same idempotency key', async () => {
  const [plan] = await d.environmentWithPlans('replay', tokens.agent, 1);
  const first = ok(
    await d.start(tokens.d1, 'replay', plan, { idempotencyKey: 'start-1' }),
  ).startDeployment;
  const replayed = ok(
    await d.start(tokens.d1, 'replay', plan, { idempotencyKey: 'start-1' }),
  ).startDeployment;
  expect(replayed).toEqual(first);
  expect(await d.list('replay')).toHaveLength(1);
  const reused = await d.start(tokens.d1, 'replay', plan, {
    idempotencyKey: 'start-1',
    heartbeatSeconds: 30,
  });
  expect(codeOf(reused)).toBe('IDEMPOTENCY_KEY_REUSED');

  // A rejection is replayed too.
  const refused = await d.start(tokens.d2, 'replay', plan, { idempotencyKey: 'start-2' });
  expect(codeOf(refused)).toBe('DEPLOYMENT_ACTIVE');
  const finished = ok(
    await d.finish(tokens.d1, first.id, 'SUCCEEDED', { idempotencyKey: 'finish-1' }),
  ).finishDeployment;
  expect(codeOf(await d.start(tokens.d2, 'replay', plan, { idempotencyKey: 'start-2' }))).toBe(
    'DEPLOYMENT_ACTIVE',
  );

  const finishedAgain = ok(
    await d.finish(tokens.d1, first.id, 'SUCCEEDED', { idempotencyKey: 'finish-1' }),
  ).finishDeployment;
  expect(finishedAgain).toEqual(finished);
  expect(
    codeOf(await d.finish(tokens.d1, first.id, 'FAILED', { idempotencyKey: 'finish-1' })),
  ).toBe('IDEMPOTENCY_KEY_REUSED');
  const finishes = (await world.auditEvents('replay')).filter(
    (e) => e.action === 'FINISH_DEPLOYMENT' && e.outcome === 'ACCEPTED',
  );
  expect(finishes).toHaveLength(1); // the replay is no second decision
});

test('roles: only DEPLOYER (and ADMIN) start, heartbeat and finish; only REVIEWER (and ADMIN) reconcile', async () => {
  const [plan] = await d.environmentWithPlans('roles', tokens.agent, 1);
  for (const role of ['agent', 'viewer', 'reviewer']) {
    const refused = await d.start(tokens[role], 'roles', plan);
    expect(codeOf(refused)).toBe('FORBIDDEN');
    expect(refused.data).toBeNull();
  }
  const started = await d.startOk(tokens.d1, 'roles', plan, 5);
  expect(codeOf(await d.heartbeat(tokens.agent, started.id))).toBe('FORBIDDEN');
  expect(codeOf(await d.finish(tokens.viewer, started.id, 'FAILED'))).toBe('FORBIDDEN');
  world.advance(5);
  expect(codeOf(await d.reconcile(tokens.d2, started.id, 'FAILED', 'n'))).toBe('FORBIDDEN');
  expect(codeOf(await d.reconcile(tokens.agent, started.id, 'FAILED', 'n'))).toBe('FORBIDDEN');
  expect(
    ok(await d.reconcile(world.admin, started.id, 'FAILED', 'admin')).reconcileDeployment,
  ).toMatchObject({ status: 'FAILED', reconciledBy: 'admin' });
  // Every role reads.
  expect(await d.list('roles')).toHaveLength(1);
  const asViewer = await world.gql(tokens.viewer, '{ deployments(environment: "roles") { id } }');
  expect(ok(asViewer)).toEqual({ deployments: [{ id: started.id }] });
});

// proves: R21
test('deployedPlan is the plan of the last SUCCEEDED deployment; deployments lists newest first', async () => {
  const [p1] = await d.environmentWithPlans('history', tokens.agent, 1);
  expect(await d.environment('history')).toEqual({
    currentPlan: { id: p1 },
    activeDeployment: null,
    deployedPlan: null,
  });
  const one = await d.startOk(tokens.d1, 'history', p1);
  expect((await d.environment('history')).activeDeployment?.id).toBe(one.id);
  ok(await d.finish(tokens.d1, one.id, 'SUCCEEDED'));

  // Publishing does not wait for deployments; the next start deploys the newer plan.
  const [p2] = await d.publish('history', tokens.agent);
  const two = await d.startOk(tokens.d2, 'history', p2);
  const [p3] = await d.publish('history', tokens.agent);
  expect((await d.get(two.id))?.status).toBe('IN_PROGRESS');
  expect(await d.environment('history')).toMatchObject({
    currentPlan: { id: p3 },
    activeDeployment: { id: two.id, plan: { id: p2 } },
    deployedPlan: { id: p1 },
  });
  ok(await d.finish(tokens.d2, two.id, 'FAILED', { detail: 'apply error' }));
  expect((await d.environment('history')).deployedPlan).toEqual({ id: p1 });
  const three = await d.startOk(tokens.d1, 'history', p3);
  ok(await d.finish(tokens.d1, three.id, 'SUCCEEDED'));
  expect(await d.environment('history')).toMatchObject({
    activeDeployment: null,
    deployedPlan: { id: p3 },
  });

  expect((await d.list('history')).map((x) => x.id)).toEqual([three.id, two.id, one.id]);
  expect((await d.list('history', 2)).map((x) => x.id)).toEqual([three.id, two.id]);
  expect((await d.list('history', 2, two.id)).map((x) => x.id)).toEqual([one.id]);
  expect(codeOf(await world.gql(world.admin, '{ deployments(environment: "none") { id } }'))).toBe(
    'NOT_FOUND',
  );
  expect(await d.get('history#99')).toBeNull();
});

test('bad input is BAD_USER_INPUT naming the field', async () => {
  const [plan] = await d.environmentWithPlans('inputs', tokens.agent, 1);
  for (const heartbeatSeconds of [4, 3601]) {
    const result = await d.start(tokens.d1, 'inputs', plan, { heartbeatSeconds });
    expect(codeOf(result)).toBe('BAD_USER_INPUT');
    expect(result.errors![0].message).toContain('heartbeatSeconds');
  }
  expect(codeOf(await d.finish(tokens.d1, 'inputs-1', 'FAILED'))).toBe('BAD_USER_INPUT');
  expect(codeOf(await d.finish(tokens.d1, 'inputs#1', 'FAILED'))).toBe('NOT_FOUND');
});

test('metrics count ended deployments by outcome and gauge the active and unknown ones', async () => {
  const [plan] = await d.environmentWithPlans('metered', tokens.agent, 1);
  const started = await d.startOk(tokens.d1, 'metered', plan, 5);
  world.advance(5);
  const scrape = async () => (await fetch(`${app.url}/metrics`)).text();
  expect(await scrape()).toMatch(/^planfence_deployments_unknown [1-9]/m);
  ok(await d.reconcile(tokens.reviewer, started.id, 'SUCCEEDED', 'checked by hand'));
  const text = await scrape();
  expect(text).toMatch(/^planfence_deployments_total\{outcome="SUCCEEDED"\} [1-9]/m);
  expect(text).toMatch(/^planfence_deployments_active \d+/m);
});

test('deploymentChanged delivers every change of status after its commit, in order; refusals deliver nothing', async () => {
  const [plan] = await d.environmentWithPlans('watched', tokens.agent, 1);
  const client = createClient({
    url: `${app.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${tokens.viewer}` },
    lazy: false,
    retryAttempts: 0,
  });
  const received: string[] = [];
  const errors: unknown[] = [];
  const stop = await subscribed(app.url, 'deploymentChanged', () =>
    client.subscribe<{ deploymentChanged: { id: string; status: string } }>(
      {
        query:
          'subscription { deploymentChanged(environment: "watched") { id status plan { id } } }',
      },
      {
        next: ({ data, errors: e }) =>
          e
            ? errors.push(e)
            : received.push(`${data!.deploymentChanged.id} ${data!.deploymentChanged.status}`),
        error: (e) => errors.push(e),
        complete: () => undefined,
      },
    ),
  );
  try {
    const first = await d.startOk(tokens.d1, 'watched', plan, 5);
    ok(await d.heartbeat(tokens.d1, first.id, 5)); // no change of status
    expect(codeOf(await d.start(tokens.d2, 'watched', plan))).toBe('DEPLOYMENT_ACTIVE');
    world.advance(5);
    ok(await d.heartbeat(tokens.d1, first.id, 5)); // lapsed, then revived
    world.advance(5);
    ok(await d.reconcile(tokens.reviewer, first.id, 'FAILED', 'lost'));
    const second = await d.startOk(tokens.d2, 'watched', plan);
    ok(await d.finish(tokens.d2, second.id, 'SUCCEEDED'));
    const expected = [
      'watched#1 IN_PROGRESS',
      'watched#1 UNKNOWN',
      'watched#1 IN_PROGRESS',
      'watched#1 UNKNOWN',
      'watched#1 FAILED',
      'watched#2 IN_PROGRESS',
      'watched#2 SUCCEEDED',
    ];
    await until(
      'every change to reach the subscriber',
      () => received.length >= expected.length || errors.length > 0,
    );
    expect(errors).toEqual([]);
    expect(received).toEqual(expected);
  } finally {
    stop();
    await client.dispose();
  }
});
