/**
 * A refusal flood over one WebSocket: a client sends subscription after subscription that
 * the resolver refuses (FORBIDDEN: an environment outside its token). Every refusal counts
 * against the socket, whatever refused it (docs/limits.md: more than 10× the subscription
 * cap refused on one socket closes it 4429), so the flood ends with the socket, the
 * service's memory grows by a bounded amount and /health keeps answering.
 */
import { RawSocket } from './support/raw-socket.js';
import { startApp, type TestApp } from './support/app.js';
import { ok, World } from './support/world.js';
import { healthBaseline, healthProbe, judgeHealth, turnsOf } from './hostile/health.js';

let app: TestApp;
let world: World;
beforeAll(async () => {
  app = await startApp({ PLANFENCE_WS_RECHECK_SECONDS: '3600' });
  world = new World(app);
  await world.createEnvironment('mine', 'MONOTONIC', false);
  await world.createEnvironment('theirs', 'MONOTONIC', false);
});
afterAll(async () => {
  RawSocket.terminateAll();
  await app.close();
});

/** What the flood may add to the process's resident memory (service and test client together). */
const RSS_BUDGET_BYTES = 96 * 1024 * 1024;

test('1,200 FORBIDDEN subscriptions on one socket: closed 4429 after 1,000, memory and /health bounded', async () => {
  const scoped = ok(
    await world.gql<{ issueToken: { token: string } }>(
      world.admin,
      'mutation { issueToken(name: "scoped", role: VIEWER, environments: ["mine"]) { token } }',
    ),
  ).issueToken.token;
  const socket = await RawSocket.admitted(app, scoped);
  // One refusal first: the guard says FORBIDDEN, and the socket stays.
  socket.subscribe('0', 'subscription { planPublished(environment: "theirs") { id content } }');
  const first = await socket.next((f) => f.id === '0' && f.type === 'error');
  expect(first?.payload[0].extensions.code).toBe('FORBIDDEN');
  expect(socket.isOpen).toBe(true);

  const baseline = await healthBaseline(app.url);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const probe = healthProbe(app.url, 10, { progress: turnsOf(app) });
  for (let i = 1; i <= 1200; i++) {
    socket.subscribe(
      String(i),
      'subscription { planPublished(environment: "theirs") { id content } }',
    );
  }
  const closed = await socket.closed;
  const probed = await probe.stop();
  const rssGrowth = process.memoryUsage().rss - rssBefore;

  expect(closed.code).toBe(4429);
  expect(closed.reason).toMatch(/^RATE_LIMITED: too many refused subscriptions/);
  const refusals = socket.frames.filter((f) => f.type === 'error');
  expect(refusals.length).toBeGreaterThan(1000);
  expect(refusals.length).toBeLessThanOrEqual(1001);
  for (const frame of refusals) expect(frame.payload[0].extensions.code).toBe('FORBIDDEN');
  expect(rssGrowth).toBeLessThan(RSS_BUDGET_BYTES);
  // /health answered between the flood's frames, each taken in a turn of its own (and on
  // demand: its worst answer under 100 × the idle p90).
  const judged = judgeHealth(probed, baseline, { atLeast: 10, maxRatio: 100 });
  if (process.env.HOSTILE_VERBOSE)
    console.log({ baseline, n: probed.samples.length, rssGrowth, ...judged });

  // The principal's other sockets are not affected.
  const other = await RawSocket.admitted(app, scoped);
  other.subscribe('ok', 'subscription { planPublished(environment: "mine") { id } }');
  await other.roundTrip();
  expect(other.isOpen).toBe(true);
});
