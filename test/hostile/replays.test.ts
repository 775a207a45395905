/**
 * Subscriptions resumed with `after` replay events read from the database. One principal
 * opening many of them must not stall the service: replays are charged to a per-principal
 * budget of replayed events and a cap of replays in progress (RATE_LIMITED beyond them),
 * and a replay is priced like a query, with the real number of events it would send
 * (BAD_USER_INPUT limit: cost beyond PLANFENCE_MAX_QUERY_COST).
 */
import { once } from 'node:events';
import WebSocket from 'ws';
import { RawSocket, type Frame } from '../support/raw-socket.js';
import { startApp, type TestApp } from '../support/app.js';
import { codeOf, ok, World } from '../support/world.js';

const apps: TestApp[] = [];
async function service(env: Record<string, string>): Promise<World> {
  const app = await startApp({ PLANFENCE_WS_RECHECK_SECONDS: '3600', ...env });
  apps.push(app);
  return new World(app);
}
afterAll(async () => {
  RawSocket.terminateAll();
  await Promise.all(apps.map((app) => app.close()));
});

const AUDIT =
  'subscription($e: String!, $after: ID) { auditEventRecorded(environment: $e, after: $after) { id action } }';
const PLANS = (fields: string) =>
  `subscription($e: String!, $after: ID) { planPublished(environment: $e, after: $after) { ${fields} } }`;

/** The first answer to subscription `id`: its first event, or its error. */
async function firstAnswer(socket: RawSocket, id: string): Promise<Frame> {
  const frame = await socket.next((f) => f.id === id && (f.type === 'next' || f.type === 'error'));
  if (!frame) throw new Error(`socket closed before subscription ${id} was answered`);
  return frame;
}

test('one VIEWER replaying on many sockets is held to its budget; a concurrent submitPlan goes through', async () => {
  const world = await service({
    PLANFENCE_WS_REPLAY_EVENTS_PER_MINUTE: '300',
    PLANFENCE_WS_MAX_REPLAYS_PER_PRINCIPAL: '2',
  });
  await world.createEnvironment('prod', 'MONOTONIC', false);
  for (let i = 0; i < 50; i++) {
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "prod", reason: "drill") { name } }',
      ),
    );
    ok(
      await world.gql(
        world.admin,
        'mutation { unfreezeEnvironment(environment: "prod") { name } }',
      ),
    );
  }
  const viewer = await world.issue('watcher', 'VIEWER');
  const agent = await world.issue('agent', 'AGENT');
  const generation = await world.acquire(agent, 'prod', 600);

  const sockets = await Promise.all(
    Array.from({ length: 4 }, () => RawSocket.admitted(world.app, viewer)),
  );
  for (const socket of sockets) {
    for (let i = 0; i < 10; i++) socket.subscribe(`r${i}`, AUDIT, { e: 'prod', after: '1' });
  }
  const submitted = world.submit(agent, 'prod', generation, 'plan while replays run');

  const answers = (
    await Promise.all(
      sockets.map((socket) =>
        Promise.all(Array.from({ length: 10 }, (_, i) => firstAnswer(socket, `r${i}`))),
      ),
    )
  ).flat();
  const refused = answers.filter((f) => f.type === 'error');
  const admitted = answers.filter((f) => f.type === 'next');
  // 300 events per minute of budget, about 100 events per replay: at most 3 replays run.
  expect(admitted.length).toBeGreaterThanOrEqual(1);
  expect(admitted.length).toBeLessThanOrEqual(3);
  for (const frame of refused) {
    expect(frame.payload[0].extensions.code).toBe('RATE_LIMITED');
    expect(frame.payload[0].extensions.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  }
  expect(codeOf(await submitted)).toBe('OK');
  // Other principals are not charged for the watcher's replays.
  const other = await world.issue('other', 'VIEWER');
  const socket = await RawSocket.admitted(world.app, other);
  socket.subscribe('mine', AUDIT, { e: 'prod', after: '90' });
  expect((await firstAnswer(socket, 'mine')).type).toBe('next');
});

test('a replay is priced with the events it would send: content of many plans is over the cost limit', async () => {
  const world = await service({
    PLANFENCE_MAX_PLAN_BYTES: '65536',
    PLANFENCE_MAX_QUERY_COST: '100',
  });
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const agent = await world.issue('agent', 'AGENT');
  const viewer = await world.issue('viewer', 'VIEWER');
  const generation = await world.acquire(agent, 'prod', 600);
  const plans = [];
  for (let i = 0; i < 4; i++)
    plans.push(await world.submitOk(agent, 'prod', generation, `plan ${i}`));
  const socket = await RawSocket.admitted(world.app, viewer);

  // Three plans with content (64 KiB each as the cost counts it): refused before anything is read.
  socket.subscribe('content', PLANS('id content'), { e: 'prod', after: plans[0].id });
  const refused = await firstAnswer(socket, 'content');
  expect(refused.type).toBe('error');
  expect(refused.payload[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit: 'cost' });

  // The same replay without content, and content of one plan, fit.
  socket.subscribe('ids', PLANS('id'), { e: 'prod', after: plans[0].id });
  expect((await firstAnswer(socket, 'ids')).payload.data.planPublished.id).toBe(plans[1].id);
  socket.subscribe('last', PLANS('id content'), { e: 'prod', after: plans[2].id });
  expect((await firstAnswer(socket, 'last')).payload.data.planPublished).toEqual({
    id: plans[3].id,
    content: 'plan 3',
  });
});

test('a replay to a client that does not read holds its slot; when the client leaves, the slot is free again', async () => {
  const world = await service({ PLANFENCE_WS_MAX_REPLAYS_PER_PRINCIPAL: '1' });
  await world.createEnvironment('prod', 'MONOTONIC', false);
  const agent = await world.issue('agent', 'AGENT');
  const viewer = await world.issue('reader', 'VIEWER');
  const generation = await world.acquire(agent, 'prod', 600);
  const first = await world.submitOk(agent, 'prod', generation, 'first');
  // 100 plans of 200 KiB: 20 MB, more than the socket buffers of a client that stops reading.
  for (let i = 0; i < 100; i++) {
    await world.submitOk(agent, 'prod', generation, `${i} ${'x'.repeat(200 * 1024)}`);
  }

  const stalled = new WebSocket(
    `${world.app.url.replace('http', 'ws')}/graphql`,
    'graphql-transport-ws',
  );
  await once(stalled, 'open');
  stalled.send(
    JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${viewer}` } }),
  );
  const [ack] = (await once(stalled, 'message')) as [Buffer];
  expect(JSON.parse(ack.toString()).type).toBe('connection_ack');
  stalled.send(
    JSON.stringify({
      id: 'big',
      type: 'subscribe',
      payload: { query: PLANS('id content'), variables: { e: 'prod', after: first.id } },
    }),
  );
  // The first event arrives, then the client stops reading.
  await once(stalled, 'message');
  (stalled as unknown as { _socket: { pause(): void } })._socket.pause();

  const other = await RawSocket.admitted(world.app, viewer);
  other.subscribe('second', PLANS('id'), { e: 'prod', after: first.id });
  const refused = await firstAnswer(other, 'second');
  expect(refused.type).toBe('error');
  expect(refused.payload[0].extensions.code).toBe('RATE_LIMITED');

  stalled.terminate();
  await once(stalled, 'close');
  // The stalled replay ends with its socket and gives its slot back.
  for (let i = 0; ; i++) {
    other.subscribe(`again-${i}`, PLANS('id'), { e: 'prod', after: first.id });
    const answer = await firstAnswer(other, `again-${i}`);
    if (answer.type === 'next') break;
    expect(answer.payload[0].extensions.code).toBe('RATE_LIMITED');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});
