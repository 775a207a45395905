/**
 * WebSockets as an attacker uses them: no token, no connection_init, a revoked token's
 * open subscriptions, thousands of subscriptions or sockets, thousands of root fields.
 * Each is refused with a graphql-ws close code or a coded error, on the real service.
 */
import { parse } from 'graphql';
import { scratchDatabase, startApp, TEST_DATABASE, type TestApp } from '../support/app.js';
import { ok, World } from '../support/world.js';
import { type Frame, RawSocket } from '../support/raw-socket.js';
import { subscribed } from '../support/subscribed.js';

let app: TestApp;
let world: World;

const PUBLISHED = 'subscription($e: String!) { planPublished(environment: $e) { id } }';

beforeAll(async () => {
  app = await startApp({
    PLANFENCE_WS_INIT_TIMEOUT_SECONDS: '1',
    PLANFENCE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET: '3',
    PLANFENCE_WS_MAX_SOCKETS_PER_PRINCIPAL: '2',
    // Revocation must reach open sockets by its signal, not by the periodic re-check.
    PLANFENCE_WS_RECHECK_SECONDS: '3600',
  });
  world = new World(app);
});
afterAll(async () => {
  RawSocket.terminateAll();
  await app.close();
});

/**
 * Subscribes `socket` to planPublished in `environment` under each of `ids`, and returns
 * once the service listens for all of them (a publication after this reaches them).
 */
async function listen(socket: RawSocket, environment: string, ...ids: string[]): Promise<void> {
  await ensureEnvironment(environment);
  return subscribed(
    app.url,
    'planPublished',
    () => ids.forEach((id) => socket.subscribe(id, PUBLISHED, { e: environment })),
    ids.length,
  );
}

/** Environments exist before anything subscribes to them or publishes in them. */
const environments = new Set<string>();
async function ensureEnvironment(environment: string): Promise<void> {
  if (environments.has(environment)) return;
  environments.add(environment);
  await world.createEnvironment(environment, 'MONOTONIC', false);
}

/** Publishes one plan in `environment` (created on first use), as `agent`. */
async function publish(agent: string, environment: string): Promise<string> {
  await ensureEnvironment(environment);
  const generation = await world.acquire(agent, environment, 600);
  return (await world.submitOk(agent, environment, generation, `plan for ${environment}`)).id;
}

describe('admission: connection_init must carry a valid token', () => {
  test.each([
    ['no payload', undefined],
    ['no authorization', {}],
    ['an unknown token', { authorization: 'Bearer pf_not_a_token' }],
    ['a malformed header', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a non-string authorization', { authorization: 12345 }],
    ['an object as authorization', { authorization: { Bearer: 'x' } }],
  ])('%s: the socket is closed 4403 UNAUTHENTICATED, never acknowledged', async (_, payload) => {
    const socket = await RawSocket.init(app, payload);
    const closed = await socket.closed;
    expect(closed.code).toBe(4403);
    expect(closed.reason).toMatch(/^UNAUTHENTICATED: /);
    expect(socket.frames.map((f) => f.type)).not.toContain('connection_ack');
  });

  test('a socket that never sends connection_init is closed 4408 after the wait', async () => {
    const socket = await RawSocket.open(app);
    const closed = await socket.closed;
    expect(closed).toEqual({
      code: 4408,
      reason: 'UNAUTHENTICATED: no connection_init with a valid token within 1 s',
    });
    expect(socket.frames).toEqual([]);
  });

  test('a subscribe before connection_init starts nothing and closes the socket', async () => {
    const viewer = await world.issue('early-bird', 'VIEWER');
    const agent = await world.issue('early-agent', 'AGENT');
    const socket = await RawSocket.open(app);
    socket.subscribe('1', PUBLISHED, { e: 'early' });
    await socket.closed;
    expect(socket.frames.filter((f) => f.type === 'next')).toEqual([]);
    // The token would have been good: it is the order that is refused.
    const proper = await RawSocket.admitted(app, viewer);
    await listen(proper, 'early', '1');
    const id = await publish(agent, 'early');
    const event = await proper.next((f) => f.type === 'next');
    expect(event?.payload).toEqual({ data: { planPublished: { id } } });
  });

  test('a huge connection_init is refused with 4400 before it is read', async () => {
    const socket = await RawSocket.init(app, {
      authorization: 'Bearer x',
      padding: 'x'.repeat(100_000),
    });
    expect(await socket.closed).toEqual({
      code: 4400,
      reason: 'the first frame must be a small connection_init',
    });
    expect(socket.frames.map((f) => f.type)).not.toContain('connection_ack');
  });

  test('a second connection_init closes the socket 4429', async () => {
    const viewer = await world.issue('twice', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    socket.send({ type: 'connection_init', payload: { authorization: `Bearer ${viewer}` } });
    expect((await socket.closed).code).toBe(4429);
  });
});

describe('revocation reaches open sockets', () => {
  // proves: R26
  test("a revoked token's open subscription ends at once, and no new one starts", async () => {
    const viewer = await world.issue('soon-revoked', 'VIEWER');
    const agent = await world.issue('revocation-agent', 'AGENT');
    const socket = await RawSocket.admitted(app, viewer);
    await listen(socket, 'revocation', 'live');
    const first = await publish(agent, 'revocation');
    expect((await socket.next((f) => f.type === 'next'))?.payload).toEqual({
      data: { planPublished: { id: first } },
    });

    ok(await world.gql(world.admin, 'mutation { revokeToken(name: "soon-revoked") { name } }'));
    const closed = await socket.closed;
    expect(closed).toEqual({ code: 4403, reason: 'UNAUTHENTICATED: this token was revoked' });

    await publish(agent, 'revocation');
    expect(socket.frames.filter((f) => f.type === 'next')).toHaveLength(1);
    const again = await RawSocket.init(app, { authorization: `Bearer ${viewer}` });
    expect(await again.closed).toEqual({
      code: 4403,
      reason: 'UNAUTHENTICATED: this token was revoked',
    });
    expect(again.frames.map((f) => f.type)).not.toContain('connection_ack');
  });

  test("revoking one principal leaves other principals' sockets open", async () => {
    const kept = await world.issue('kept-viewer', 'VIEWER');
    await world.issue('dropped-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, kept);
    ok(await world.gql(world.admin, 'mutation { revokeToken(name: "dropped-viewer") { name } }'));
    await socket.roundTrip();
    expect(socket.isOpen).toBe(true);
  });
});

describe('caps', () => {
  test('a socket holds at most PLANFENCE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET subscriptions; one more is RATE_LIMITED', async () => {
    const viewer = await world.issue('greedy-viewer', 'VIEWER');
    const agent = await world.issue('greedy-agent', 'AGENT');
    const socket = await RawSocket.admitted(app, viewer);
    await listen(socket, 'greedy', '1', '2', '3');
    await publish(agent, 'greedy');
    for (const id of ['1', '2', '3']) await socket.next((f) => f.type === 'next' && f.id === id);

    socket.subscribe('4', PUBLISHED, { e: 'greedy' });
    const refused = await socket.next((f) => f.type === 'error');
    expect(refused?.id).toBe('4');
    expect(refused?.payload[0].extensions).toEqual({
      code: 'RATE_LIMITED',
      retryAfterSeconds: null,
    });
    expect(refused?.payload[0].message).toMatch(/already holds 3 subscriptions/);

    // Ending one makes room for another; the socket stayed open throughout.
    socket.send({ id: '1', type: 'complete' });
    await listen(socket, 'greedy', '5');
    const second = await publish(agent, 'greedy');
    for (const id of ['2', '3', '5']) {
      await socket.next(
        (f) => f.type === 'next' && f.id === id && f.payload.data.planPublished.id === second,
      );
    }
    expect(socket.frames.filter((f) => f.type === 'error')).toHaveLength(1);
    expect(
      socket.frames
        .filter((f) => f.type === 'next')
        .map((f) => f.id)
        .sort(),
    ).toEqual(['1', '2', '2', '3', '3', '5']);
    expect(socket.isOpen).toBe(true);
  });

  test('a socket that keeps sending refused subscriptions is closed 4429 after ten times its cap', async () => {
    const viewer = await world.issue('spammer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    const twoRoots =
      'subscription { a: planPublished(environment: "x") { id } b: planPublished(environment: "y") { id } }';
    for (let i = 0; i < 31; i++) socket.subscribe(`spam-${i}`, twoRoots);
    expect(await socket.closed).toEqual({
      code: 4429,
      reason: 'RATE_LIMITED: too many refused subscriptions on this socket',
    });
    const refusals = socket.frames.filter((f) => f.type === 'error');
    // The last refusals may be cut off by the close itself; each one that arrived is coded.
    expect(refusals.length).toBeGreaterThan(0);
    // Arriving together, the later ones also meet the subscription cap.
    for (const refusal of refusals) {
      expect(['BAD_USER_INPUT', 'RATE_LIMITED']).toContain(refusal.payload[0].extensions.code);
    }
    expect(socket.frames.filter((f) => f.type === 'next')).toEqual([]);
  });

  test('a principal holds at most PLANFENCE_WS_MAX_SOCKETS_PER_PRINCIPAL sockets; one more is closed 4429 RATE_LIMITED', async () => {
    const viewer = await world.issue('many-sockets', 'VIEWER');
    const first = await RawSocket.admitted(app, viewer);
    await RawSocket.admitted(app, viewer);
    const third = await RawSocket.init(app, { authorization: `Bearer ${viewer}` });
    const closed = await third.closed;
    expect(closed.code).toBe(4429);
    expect(closed.reason).toBe('RATE_LIMITED: many-sockets already has 2 open sockets');
    expect(third.frames.map((f) => f.type)).not.toContain('connection_ack');

    // Another principal is not affected; and a closed socket frees its place.
    const other = await world.issue('other-sockets', 'VIEWER');
    await RawSocket.admitted(app, other);
    first.close();
    await first.closed;
    await RawSocket.admitted(app, viewer);
  });
});

describe('one root field per subscription', () => {
  test('a subscription with 2,000 root fields is refused with BAD_USER_INPUT and starts nothing', async () => {
    const viewer = await world.issue('wide-viewer', 'VIEWER');
    const agent = await world.issue('wide-agent', 'AGENT');
    const socket = await RawSocket.admitted(app, viewer);
    const fields = Array.from(
      { length: 2000 },
      (_, i) => `a${i}: planPublished(environment: "wide") { id }`,
    );
    socket.subscribe('wide', `subscription { ${fields.join(' ')} }`);
    const refused = await socket.next((f) => f.type === 'error');
    expect(refused?.id).toBe('wide');
    // Refused by whichever check sees it first: the document's size cap or one root field per subscription.
    expect(refused?.payload[0].extensions).toEqual(
      expect.objectContaining({ code: 'BAD_USER_INPUT' }),
    );
    expect(refused?.payload[0].message).toMatch(/exactly one root field|PLANFENCE_MAX_QUERY_BYTES/);

    // Two roots through a fragment are refused the same way.
    socket.subscribe(
      'fragment',
      'subscription { ...Both } fragment Both on Subscription { planPublished(environment: "wide") { id } auditEventRecorded(environment: "wide") { id } }',
    );
    const second = await socket.next((f) => f.type === 'error' && f.id === 'fragment');
    expect(second?.payload[0].extensions).toEqual({ code: 'BAD_USER_INPUT' });

    // The refusals hold no place: the socket still holds its full quota of 3.
    await listen(socket, 'wide', '1', '2', '3');
    await publish(agent, 'wide');
    for (const id of ['1', '2', '3']) await socket.next((f) => f.type === 'next' && f.id === id);
    expect(socket.frames.filter((f) => f.type === 'next' && f.id === 'wide')).toEqual([]);
    expect(socket.frames.filter((f) => f.type === 'error')).toHaveLength(2);
  });

  test('a fragment bomb is refused by the field cap before validation', async () => {
    const viewer = await world.issue('bomb-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    const levels = Array.from(
      { length: 30 },
      (_, i) => `fragment F${i} on Plan { ...F${i + 1} ...F${i + 1} id }`,
    );
    socket.subscribe(
      'bomb',
      `subscription { planPublished(environment: "x") { ...F0 } } ${levels.join(' ')} fragment F30 on Plan { id }`,
    );
    const refused = await socket.next((f) => f.type === 'error');
    expect(refused?.payload[0].extensions).toEqual({ code: 'BAD_USER_INPUT' });
    expect(refused?.payload[0].message).toMatch(/at most 200 fields/);
  });

  test('a subscription to an environment that does not exist is NOT_FOUND, as a query on it', async () => {
    const viewer = await world.issue('nowhere-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    for (const field of ['planPublished', 'auditEventRecorded', 'deploymentChanged'])
      socket.subscribe(field, `subscription { ${field}(environment: "nowhere") { __typename } }`);
    for (const field of ['planPublished', 'auditEventRecorded', 'deploymentChanged']) {
      const refused = await socket.next((f) => f.id === field);
      expect({ field, type: refused?.type, code: refused?.payload?.[0]?.extensions?.code }).toEqual(
        { field, type: 'error', code: 'NOT_FOUND' },
      );
    }
    expect(socket.isOpen).toBe(true);
  });

  test('an invalid subscription document is refused with BAD_USER_INPUT', async () => {
    const viewer = await world.issue('typo-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    socket.subscribe('typo', 'subscription { planPublished(environment: "x") { nosuchfield } }');
    const refused = await socket.next((f) => f.type === 'error');
    expect(refused?.payload[0].extensions).toEqual({ code: 'BAD_USER_INPUT' });
    expect(refused?.payload[0].message).toMatch(/nosuchfield/);
  });

  test('a document that does not parse, or names no single operation, is refused with BAD_USER_INPUT', async () => {
    const viewer = await world.issue('syntax-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    socket.subscribe('broken', 'subscription { planPublished(');
    socket.subscribe(
      'two',
      'subscription A { planPublished(environment: "x") { id } } subscription B { planPublished(environment: "y") { id } }',
    );
    const broken = await socket.next((f) => f.type === 'error' && f.id === 'broken');
    const two = await socket.next((f) => f.type === 'error' && f.id === 'two');
    expect(broken?.payload[0].extensions).toEqual({ code: 'BAD_USER_INPUT' });
    expect(broken?.payload[0].message).toMatch(/^Syntax Error/);
    expect(two?.payload[0]).toEqual({
      message: 'the document has no single operation to run (name one with operationName)',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(socket.isOpen).toBe(true);
  });

  test('a subscribe frame without a usable payload, or with bad variables, is BAD_USER_INPUT with a plain message', async () => {
    const viewer = await world.issue('payload-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    const query = 'subscription($e: String!) { planPublished(environment: $e) { id } }';
    const frames: [string, Frame, RegExp][] = [
      ['none', { type: 'subscribe' }, /needs a payload/],
      ['null', { type: 'subscribe', payload: null }, /needs a payload/],
      ['number', { type: 'subscribe', payload: { query: 5 } }, /query must be a string/],
      ['text', { type: 'subscribe', payload: { query, variables: 'x' } }, /Variables must be/],
      ['missing', { type: 'subscribe', payload: { query } }, /^Variable "\$e"/],
      ['wrong', { type: 'subscribe', payload: { query, variables: { e: 5 } } }, /^Variable "\$e"/],
    ];
    for (const [id, frame] of frames) socket.send({ id, ...frame });
    for (const [id, , message] of frames) {
      const refused = await socket.next((f) => f.type === 'error' && f.id === id);
      expect({ id, code: refused?.payload[0].extensions.code }).toEqual({
        id,
        code: 'BAD_USER_INPUT',
      });
      expect(refused?.payload[0].message).toMatch(message);
    }
    expect(socket.frames.filter((f) => f.type === 'next')).toEqual([]);
    expect(socket.isOpen).toBe(true);
  });

  test('a pre-parsed document instead of a query string is refused', async () => {
    const viewer = await world.issue('ast-viewer', 'VIEWER');
    const socket = await RawSocket.admitted(app, viewer);
    // A well-formed subscription, sent as its syntax tree: it would skip the parsing hook.
    const tree = JSON.parse(
      JSON.stringify(parse('subscription { planPublished(environment: "x") { id } }')),
    ) as unknown;
    socket.send({ id: 'ast', type: 'subscribe', payload: { query: tree } });
    const refused = await socket.next((f) => f.type === 'error');
    expect(refused?.id).toBe('ast');
    expect(refused?.payload[0]).toMatchObject({
      message: 'a subscription query must be a string',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(socket.frames.filter((f) => f.type === 'next')).toEqual([]);
  });
});

(TEST_DATABASE === 'postgres' ? describe : describe.skip)(
  'two instances on one PostgreSQL database',
  () => {
    // proves: R26
    test('a revocation through instance 1 ends a subscription on instance 2 at once', async () => {
      const database = await scratchDatabase(true);
      const env = { DATABASE_URL: database.url, PLANFENCE_WS_RECHECK_SECONDS: '3600' };
      const one = await startApp(env);
      const two = await startApp(env);
      try {
        const viewer = ok(
          await one.gql<{ issueToken: { token: string } }>(
            world.admin,
            'mutation { issueToken(name: "remote-viewer", role: VIEWER) { token } }',
          ),
        ).issueToken.token;
        const socket = await RawSocket.admitted(two, viewer);
        socket.subscribe('remote', PUBLISHED, { e: 'remote' });
        await socket.roundTrip();
        ok(await one.gql(world.admin, 'mutation { revokeToken(name: "remote-viewer") { name } }'));
        expect(await socket.closed).toEqual({
          code: 4403,
          reason: 'UNAUTHENTICATED: this token was revoked',
        });
        const again = await RawSocket.init(two, { authorization: `Bearer ${viewer}` });
        expect((await again.closed).code).toBe(4403);
      } finally {
        RawSocket.terminateAll();
        await two.close();
        await one.close();
        await database.cleanup();
      }
    });
  },
);
