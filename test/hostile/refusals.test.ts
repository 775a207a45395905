/**
 * Refused calls are not free: a FORBIDDEN request is charged to its principal's request
 * rate like any other (so a flood of them ends in RATE_LIMITED), the audit rows it leaves
 * are bounded per principal, and a subscription the limiter refuses answers RATE_LIMITED.
 */
import { Database } from '../../src/database/database.js';
import { ADMIN_TOKEN, startApp, type TestApp } from '../support/app.js';
import { holdQuotaClock } from '../support/quota-clock.js';
import { RawSocket } from '../support/raw-socket.js';
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

/** 32 aliased acquireLease fields on `environment`. */
const ACQUIRE_32 = (environment: string) =>
  `mutation { ${Array.from(
    { length: 32 },
    (_, i) =>
      `a${i}: acquireLease(input: { environment: "${environment}", ttlSeconds: 30 }) { generation }`,
  ).join(' ')} }`;

test('FORBIDDEN requests are charged to the request rate; their audit rows are bounded per principal', async () => {
  const world = await service({
    PLANFENCE_RATE_REQUESTS_PER_SECOND: '1',
    PLANFENCE_RATE_REQUESTS_BURST: '5',
    PLANFENCE_AUDIT_REFUSALS_PER_MINUTE: '3',
  });
  holdQuotaClock(world.app);
  await world.createEnvironment('prod', 'MONOTONIC', false);
  await world.createEnvironment('staging-eu', 'MONOTONIC', false);
  const scoped = ok(
    await world.gql<{ issueToken: { token: string } }>(
      ADMIN_TOKEN,
      'mutation { issueToken(name: "ci-staging", role: AGENT, environments: ["staging-*"]) { token } }',
    ),
  ).issueToken.token;

  const codes: string[] = [];
  for (let i = 0; i < 10; i++) codes.push(codeOf(await world.gql(scoped, ACQUIRE_32('prod'))));
  expect(codes.slice(0, 3)).toEqual(['FORBIDDEN', 'FORBIDDEN', 'FORBIDDEN']);
  expect(codes.at(-1)).toBe('RATE_LIMITED');
  // The refusals used up the principal's requests: an allowed call waits too.
  expect(codeOf(await world.acquireRaw(scoped, 'staging-eu', 30))).toBe('RATE_LIMITED');

  const rows = await world.app.app
    .get(Database)
    .read<{ n: number | string }[]>((m) =>
      m.query(
        "SELECT COUNT(*) AS n FROM audit_events WHERE actor = 'ci-staging' AND code = 'FORBIDDEN'",
      ),
    );
  expect(Number(rows[0].n)).toBeGreaterThanOrEqual(1);
  expect(Number(rows[0].n)).toBeLessThanOrEqual(3);
  expect((await world.environment('prod')).lastIssuedGeneration).toBe(0);
});

test('an activityRecorded subscription refused by the limiter answers RATE_LIMITED', async () => {
  const world = await service({
    PLANFENCE_RATE_REQUESTS_PER_SECOND: '1',
    PLANFENCE_RATE_REQUESTS_BURST: '2',
  });
  holdQuotaClock(world.app);
  const viewer = await world.issue('dash', 'VIEWER');
  const socket = await RawSocket.admitted(world.app, viewer);
  for (let i = 0; i < 8; i++) {
    socket.subscribe(`s${i}`, 'subscription { activityRecorded { id } }');
  }
  // Two fit the burst; the others are refused, each with an error frame.
  const refused = () => socket.frames.filter((f) => f.type === 'error');
  await socket.next(() => refused().length >= 2);
  const errors = refused();
  expect(errors.length).toBeGreaterThanOrEqual(2);
  for (const frame of errors) {
    expect(frame.payload[0].extensions.code).toBe('RATE_LIMITED');
    expect(frame.payload[0].extensions.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  }
});
