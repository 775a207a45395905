/**
 * Scoped, expiring and rotated tokens (DESIGN §12, R26–R27) on the real service: a token
 * limited to environment patterns, one that expires at its instant by the service clock,
 * a rotation that stops the old secret at once, and revocation across two instances.
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
import { World } from './support/world.js';
import { RawSocket } from './support/raw-socket.js';

let app: TestApp;
let world: World;

const ISSUE = `mutation($name: String!, $role: Role!, $groups: [String!], $environments: [String!], $expires: Int) {
  issueToken(name: $name, role: $role, groups: $groups, environments: $environments, expiresInSeconds: $expires) {
    token principal { name role groups environments expiresAt }
  }
}`;

async function issue(
  name: string,
  role: string,
  extra: { environments?: string[]; expires?: number; groups?: string[] } = {},
): Promise<string> {
  return ok(
    await app.gql<{ issueToken: { token: string } }>(ADMIN_TOKEN, ISSUE, { name, role, ...extra }),
  ).issueToken.token;
}

beforeAll(async () => {
  app = await startApp({ PLANFENCE_WS_RECHECK_SECONDS: '3600' });
  world = new World(app);
  for (const name of ['prod', 'staging-eu', 'staging-us']) {
    await world.createEnvironment(name, 'MONOTONIC', false);
  }
});
afterAll(async () => {
  RawSocket.terminateAll();
  await app.close();
});

describe('a token limited to staging-*', () => {
  let token: string;
  beforeAll(async () => {
    token = await issue('ci-staging', 'AGENT', { environments: ['staging-*'] });
  });

  // proves: R26
  test('acts on staging-eu', async () => {
    const generation = await world.acquire(token, 'staging-eu', 60);
    expect(generation).toBeGreaterThan(0);
    const plan = await world.submitOk(token, 'staging-eu', generation, 'plan for staging-eu');
    expect(plan.id).toMatch(/^staging-eu@/);
  });

  // proves: R26, R27
  test('is FORBIDDEN on prod, and the refusal is in prod’s audit log', async () => {
    const result = await world.acquireRaw(token, 'prod', 60);
    expect(codeOf(result)).toBe('FORBIDDEN');
    expect(result.errors![0].message).toContain('staging-*');
    const events = await world.auditEvents('prod');
    expect(events).toContainEqual(
      expect.objectContaining({
        actor: 'ci-staging',
        action: 'ACQUIRE_LEASE',
        outcome: 'REJECTED',
        code: 'FORBIDDEN',
      }),
    );
  });

  // proves: R26
  test('is FORBIDDEN on prod for reads, plan ids and subscriptions too', async () => {
    expect(codeOf(await app.gql(token, '{ currentPlan(environment: "prod") { id } }'))).toBe(
      'FORBIDDEN',
    );
    expect(codeOf(await app.gql(token, '{ plan(id: "prod@1.1") { id } }'))).toBe('FORBIDDEN');
    expect(codeOf(await app.gql(token, '{ environment(name: "prod") { name } }'))).toBe(
      'FORBIDDEN',
    );
    const socket = await RawSocket.admitted(app, token);
    socket.subscribe('p', 'subscription { planPublished(environment: "prod") { id } }');
    const refused = await socket.next((f) => f.id === 'p' && f.type !== 'next');
    expect(refused?.payload?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  // proves: R26
  test('lists only its environments', async () => {
    const list = ok(
      await app.gql<{ environments: { name: string }[] }>(token, '{ environments { name } }'),
    );
    expect(list.environments.map((e) => e.name)).toEqual(['staging-eu', 'staging-us']);
    const all = ok(
      await app.gql<{ environments: { name: string }[] }>(ADMIN_TOKEN, '{ environments { name } }'),
    );
    expect(all.environments.map((e) => e.name)).toEqual(['prod', 'staging-eu', 'staging-us']);
  });

  // proves: R26
  test("a reviewer limited to staging-* is queued only its environments' plans", async () => {
    for (const name of ['staging-queue', 'prod-queue']) {
      await world.createEnvironment(name, 'MONOTONIC', true);
      const generation = await world.acquire(ADMIN_TOKEN, name, 60);
      await world.submitOk(ADMIN_TOKEN, name, generation, `plan for ${name}`);
    }
    const queueOf = async (bearer: string) =>
      ok(
        await app.gql<{ reviewQueue: { environment: string }[] }>(
          bearer,
          '{ reviewQueue { environment } }',
        ),
      ).reviewQueue.map((plan) => plan.environment);
    const reviewer = await issue('reviewer-staging', 'REVIEWER', { environments: ['staging-*'] });
    expect(await queueOf(reviewer)).toEqual(['staging-queue']);
    const everywhere = await issue('reviewer-everywhere', 'REVIEWER');
    expect((await queueOf(everywhere)).sort()).toEqual(['prod-queue', 'staging-queue']);
  });

  test('whoami and principals show the patterns', async () => {
    const me = ok(await app.gql(token, '{ whoami { name environments expiresAt } }'));
    expect(me.whoami).toEqual({ name: 'ci-staging', environments: ['staging-*'], expiresAt: null });
    const list = ok(
      await app.gql<{ principals: { name: string; environments: string[] | null }[] }>(
        ADMIN_TOKEN,
        '{ principals { name role environments } }',
      ),
    );
    expect(list.principals).toContainEqual({
      name: 'ci-staging',
      role: 'AGENT',
      environments: ['staging-*'],
    });
    expect(codeOf(await app.gql(token, '{ principals { name } }'))).toBe('FORBIDDEN');
  });
});

test('issueToken refuses bad patterns and lifetimes', async () => {
  for (const extra of [
    { environments: [] },
    { environments: ['Prod'] },
    { environments: Array.from({ length: 21 }, (_, i) => `env-${i}`) },
    { expires: 0 },
    { expires: 31_536_001 },
  ]) {
    const result = await app.gql(ADMIN_TOKEN, ISSUE, {
      name: 'bad-scope',
      role: 'VIEWER',
      ...extra,
    });
    expect(codeOf(result)).toBe('BAD_USER_INPUT');
  }
});

// proves: R26
test('an expiring token works until its instant and is UNAUTHENTICATED from then on', async () => {
  const token = await issue('short-lived', 'VIEWER', { expires: 600 });
  const me = ok(await app.gql(token, '{ whoami { name expiresAt } }'));
  const expiresAt = Date.parse(me.whoami.expiresAt);
  expect(expiresAt).toBe((await app.clock.now()) + 600_000);
  app.clock.advance(599_999);
  expect(codeOf(await app.gql(token, '{ whoami { name } }'))).toBe('OK');
  app.clock.advance(1);
  const expired = await app.gql(token, '{ whoami { name } }');
  expect(codeOf(expired)).toBe('UNAUTHENTICATED');
  expect(expired.errors![0].message).toContain('expired');
});

// proves: R26
test('rotation stops the old secret at once, including its open subscription', async () => {
  const old = await issue('rotated', 'VIEWER');
  const socket = await RawSocket.admitted(app, old);
  socket.subscribe('s', 'subscription { planPublished(environment: "staging-eu") { id } }');
  await socket.roundTrip();
  const rotated = ok(
    await app.gql<{ rotateToken: { token: string; principal: { name: string } } }>(
      ADMIN_TOKEN,
      'mutation { rotateToken(name: "rotated") { token principal { name } } }',
    ),
  ).rotateToken;
  expect(rotated.principal.name).toBe('rotated');
  expect(rotated.token).not.toBe(old);
  expect((await socket.closed).code).toBe(4403);
  expect(codeOf(await app.gql(old, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
  expect(ok(await app.gql(rotated.token, '{ whoami { name } }')).whoami.name).toBe('rotated');
});

test('rotating an unknown principal is NOT_FOUND, a revoked one FORBIDDEN, a non-admin FORBIDDEN', async () => {
  expect(
    codeOf(await app.gql(ADMIN_TOKEN, 'mutation { rotateToken(name: "nobody") { token } }')),
  ).toBe('NOT_FOUND');
  const viewer = await issue('gone', 'VIEWER');
  ok(await app.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "gone") { name } }'));
  expect(
    codeOf(await app.gql(ADMIN_TOKEN, 'mutation { rotateToken(name: "gone") { token } }')),
  ).toBe('FORBIDDEN');
  const other = await issue('other-viewer', 'VIEWER');
  expect(
    codeOf(await app.gql(other, 'mutation { rotateToken(name: "other-viewer") { token } }')),
  ).toBe('FORBIDDEN');
  expect(codeOf(await app.gql(viewer, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
});

(TEST_DATABASE === 'postgres' ? describe : describe.skip)(
  'two instances on one PostgreSQL database',
  () => {
    // proves: R26
    test('a token revoked on instance 1 is refused on instance 2 at once, and a rotated one too', async () => {
      const database = await scratchDatabase(true);
      const env = { DATABASE_URL: database.url, PLANFENCE_WS_RECHECK_SECONDS: '3600' };
      const one = await startApp(env);
      const two = await startApp(env);
      try {
        const issueOn = async (name: string) =>
          ok(
            await one.gql<{ issueToken: { token: string } }>(ADMIN_TOKEN, ISSUE, {
              name,
              role: 'VIEWER',
              environments: ['staging-*'],
            }),
          ).issueToken.token;
        const revoked = await issueOn('remote-revoked');
        expect(codeOf(await two.gql(revoked, '{ whoami { name } }'))).toBe('OK');
        const socket = await RawSocket.admitted(two, revoked);
        socket.subscribe('s', 'subscription { planPublished(environment: "staging-eu") { id } }');
        await socket.roundTrip();
        ok(await one.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "remote-revoked") { name } }'));
        expect(codeOf(await two.gql(revoked, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
        expect((await socket.closed).code).toBe(4403);

        const rotated = await issueOn('remote-rotated');
        ok(
          await one.gql(ADMIN_TOKEN, 'mutation { rotateToken(name: "remote-rotated") { token } }'),
        );
        expect(codeOf(await two.gql(rotated, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
      } finally {
        await two.close();
        await one.close();
        await database.cleanup();
      }
    });
  },
);
