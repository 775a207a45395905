/**
 * The lease queue (docs/design.md §17): agents wait their turn for an environment's lease
 * instead of failing, in FIFO or LATEST mode, and every grant is a guard decision.
 */
import { PgListener } from '../src/database/pg-listener.js';
import {
  ADMIN_TOKEN,
  scratchDatabase,
  startApp,
  TEST_DATABASE,
  type TestApp,
} from './support/app.js';
import { RawSocket } from './support/raw-socket.js';
import { codeOf, ok, World } from './support/world.js';

const TICKET =
  'id environment holder status position enqueuedAt grantedAt expiresAt lease { generation holder acquiredAt expiresAt }';

interface Ticket {
  id: string;
  environment: string;
  holder: string;
  status: string;
  position: number | null;
  enqueuedAt: string;
  grantedAt: string | null;
  expiresAt: string;
  lease: { generation: number; holder: string; acquiredAt: string; expiresAt: string } | null;
}

/** The queue as agents and an ADMIN use it over GraphQL. */
class Queue {
  constructor(readonly world: World) {}

  enqueueRaw(
    token: string,
    environment: string,
    extra: { ttlSeconds?: number; maxWaitSeconds?: number; instance?: string } = {},
    app: TestApp = this.world.app,
  ) {
    return app.gql<{ enqueueLease: Ticket }>(
      token,
      `mutation($input: EnqueueLeaseInput!) { enqueueLease(input: $input) { ${TICKET} } }`,
      { input: { environment, ...extra } },
    );
  }

  async enqueue(
    token: string,
    environment: string,
    extra: { ttlSeconds?: number; maxWaitSeconds?: number; instance?: string } = {},
    app?: TestApp,
  ): Promise<Ticket> {
    return ok(await this.enqueueRaw(token, environment, extra, app)).enqueueLease;
  }

  cancel(token: string, id: string) {
    return this.world.gql<{ cancelLeaseTicket: Ticket }>(
      token,
      `mutation($id: ID!) { cancelLeaseTicket(id: $id) { ${TICKET} } }`,
      { id },
    );
  }

  async ticket(id: string, app: TestApp = this.world.app): Promise<Ticket> {
    const result = await app.gql<{ leaseTicket: Ticket }>(
      ADMIN_TOKEN,
      `query($id: ID!) { leaseTicket(id: $id) { ${TICKET} } }`,
      { id },
    );
    return ok(result).leaseTicket;
  }

  async waiting(environment: string): Promise<Ticket[]> {
    const result = await this.world.gql<{ leaseQueue: Ticket[] }>(
      ADMIN_TOKEN,
      `query($e: String!) { leaseQueue(environment: $e) { ${TICKET} } }`,
      { e: environment },
    );
    return ok(result).leaseQueue;
  }

  policy(environment: string, input: Record<string, unknown>) {
    return this.world.gql<{
      updateEnvironmentPolicy: { queueMode: string; maxQueueLength: number };
    }>(
      ADMIN_TOKEN,
      'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { queueMode maxQueueLength } }',
      { input: { environment, ...input } },
    );
  }

  /** Reads the ticket until `done` holds (the sweeper works on its own time). */
  async until(id: string, done: (ticket: Ticket) => boolean, app?: TestApp): Promise<Ticket> {
    for (;;) {
      const ticket = await this.ticket(id, app);
      if (done(ticket)) return ticket;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

describe('on one running service', () => {
  let app: TestApp;
  let world: World;
  let queue: Queue;
  const agents: string[] = [];

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    queue = new Queue(world);
    for (let i = 0; i < 22; i++) agents.push(await world.issue(`agent-${i}`, 'AGENT'));
  });
  afterAll(() => app.close());

  // proves: R37
  test('twenty waiters are granted in the order they enqueued, each a new generation', async () => {
    await world.createEnvironment('fifo', 'STRICT');
    const first = await queue.enqueue(agents[0], 'fifo');
    expect(first).toMatchObject({ status: 'GRANTED', position: null, holder: 'agent-0' });
    expect(first.lease!.generation).toBe(1);

    const waiting: Ticket[] = [];
    for (let i = 1; i <= 20; i++) waiting.push(await queue.enqueue(agents[i], 'fifo'));
    expect(waiting.map((t) => [t.status, t.position])).toEqual(
      waiting.map((_, i) => ['WAITING', i + 1]),
    );
    expect((await queue.waiting('fifo')).map((t) => t.id)).toEqual(waiting.map((t) => t.id));

    let holder = { token: agents[0], generation: first.lease!.generation };
    const granted: [string, number][] = [];
    for (const [i, ticket] of waiting.entries()) {
      ok(await world.release(holder.token, 'fifo', holder.generation));
      const now = await queue.ticket(ticket.id);
      expect(now.status).toBe('GRANTED');
      // Granted in the transaction of the release: the lease is the ticket's at once.
      expect((await world.environment('fifo')).lease).toMatchObject({
        holder: now.holder,
        generation: now.lease!.generation,
      });
      const next = waiting[i + 1];
      if (next) expect((await queue.ticket(next.id)).position).toBe(1);
      granted.push([now.holder, now.lease!.generation]);
      holder = { token: agents[i + 1], generation: now.lease!.generation };
    }
    expect(granted).toEqual(waiting.map((t, i) => [t.holder, i + 2]));
    const env = await world.environment('fifo');
    // STRICT: the fence followed every grant (R3), and the last holder can write.
    expect(env.fence).toBe(21);
    expect(codeOf(await world.submit(agents[20], 'fifo', 21, 'last'))).toBe('OK');
    expect(codeOf(await world.submit(agents[19], 'fifo', 20, 'late'))).toBe('STALE_GENERATION');
    expect(await queue.waiting('fifo')).toEqual([]);
  });

  // proves: R39
  test('LATEST: a new ticket supersedes every waiting one; only the newest is granted', async () => {
    await world.createEnvironment('latest', 'MONOTONIC');
    expect(
      ok(await queue.policy('latest', { queueMode: 'LATEST' })).updateEnvironmentPolicy,
    ).toEqual({ queueMode: 'LATEST', maxQueueLength: 20 });
    const generation = await world.acquire(agents[0], 'latest');
    const older = await queue.enqueue(agents[1], 'latest');
    const old = await queue.enqueue(agents[2], 'latest');
    expect((await queue.ticket(older.id)).status).toBe('SUPERSEDED');
    expect(old).toMatchObject({ status: 'WAITING', position: 1 });
    const newest = await queue.enqueue(agents[3], 'latest');
    expect(newest).toMatchObject({ status: 'WAITING', position: 1 });
    expect((await queue.ticket(old.id)).status).toBe('SUPERSEDED');
    expect((await queue.waiting('latest')).map((t) => t.id)).toEqual([newest.id]);

    ok(await world.release(agents[0], 'latest', generation));
    const granted = await queue.ticket(newest.id);
    expect(granted).toMatchObject({ status: 'GRANTED', holder: 'agent-3' });
    expect(granted.lease!.generation).toBe(generation + 1);
    expect((await queue.ticket(old.id)).lease).toBeNull();
  });

  // proves: R37
  test('QUEUE_FULL {max} beyond maxQueueLength; the limits of the inputs', async () => {
    await world.createEnvironment('small', 'MONOTONIC');
    ok(await queue.policy('small', { maxQueueLength: 2 }));
    await world.acquire(agents[0], 'small');
    await queue.enqueue(agents[1], 'small');
    await queue.enqueue(agents[2], 'small');
    const full = await queue.enqueueRaw(agents[3], 'small');
    expect(codeOf(full)).toBe('QUEUE_FULL');
    expect(full.errors![0].extensions).toEqual({ code: 'QUEUE_FULL', max: 2 });
    expect(await queue.waiting('small')).toHaveLength(2);
    world.advance(3);
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toContain('planfence_lease_queue_length{environment="small"} 2');
    expect(metrics).toContain('planfence_lease_queue_wait_seconds{environment="small"} 3');

    for (const maxQueueLength of [0, 101]) {
      expect(codeOf(await queue.policy('small', { maxQueueLength }))).toBe('BAD_USER_INPUT');
    }
    for (const extra of [
      { maxWaitSeconds: 0 },
      { maxWaitSeconds: 86_401 },
      { ttlSeconds: 0 },
      { ttlSeconds: 3601 },
    ]) {
      expect(codeOf(await queue.enqueueRaw(agents[3], 'small', extra))).toBe('BAD_USER_INPUT');
    }
    expect(codeOf(await queue.enqueueRaw(agents[3], 'nowhere'))).toBe('NOT_FOUND');
    // An ADMIN may enqueue too (the queue is full for it as for anyone); a VIEWER may not.
    expect(codeOf(await queue.enqueueRaw(ADMIN_TOKEN, 'small'))).toBe('QUEUE_FULL');
    const viewer = await world.issue('viewer-q', 'VIEWER');
    expect(codeOf(await queue.enqueueRaw(viewer, 'small'))).toBe('FORBIDDEN');
  });

  // proves: R37, R39
  test('an expired lease is handed to the head ticket without any traffic, for its own ttl', async () => {
    await world.createEnvironment('idle', 'STRICT');
    const generation = await world.acquire(agents[0], 'idle', 5);
    const ticket = await queue.enqueue(agents[1], 'idle', { ttlSeconds: 20 });
    expect(ticket.status).toBe('WAITING');
    world.advance(5);
    const granted = await queue.until(ticket.id, (t) => t.status === 'GRANTED');
    expect(granted.lease!.generation).toBe(generation + 1);
    const grantedAt = new Date(granted.grantedAt!).getTime();
    expect(new Date(granted.lease!.expiresAt).getTime()).toBe(grantedAt + 20_000);
    expect(codeOf(await world.submit(agents[0], 'idle', generation, 'paused'))).toBe(
      'STALE_GENERATION',
    );
    const audit = await world.auditEvents('idle');
    expect(audit.find((e) => e.action === 'HAND_OFF_LEASE')).toMatchObject({
      actor: 'planfence',
      generation: generation + 1,
      outcome: 'ACCEPTED',
    });
    // The hand-off is the service's own decision: no door; the agents' requests came through GraphQL.
    const doors = await world.gql<{ auditEvents: { action: string; via: string | null }[] }>(
      ADMIN_TOKEN,
      '{ auditEvents(environment: "idle") { action via } }',
    );
    expect(Object.fromEntries(doors.data!.auditEvents.map((e) => [e.action, e.via]))).toMatchObject(
      { HAND_OFF_LEASE: null, ENQUEUE_LEASE: 'graphql', ACQUIRE_LEASE: 'graphql' },
    );

    // The granted holder never uses its lease: it runs out, and the next ticket is granted.
    const next = await queue.enqueue(agents[2], 'idle');
    world.advance(20);
    const after = await queue.until(next.id, (t) => t.status === 'GRANTED');
    expect(after.lease!.generation).toBe(generation + 2);
  });

  // proves: R39
  test('a ticket not granted within maxWaitSeconds turns EXPIRED and is passed over', async () => {
    await world.createEnvironment('patience', 'MONOTONIC');
    const generation = await world.acquire(agents[0], 'patience', 60);
    const impatient = await queue.enqueue(agents[1], 'patience', { maxWaitSeconds: 10 });
    const patient = await queue.enqueue(agents[2], 'patience', { maxWaitSeconds: 100 });
    expect(new Date(impatient.expiresAt).getTime() - new Date(impatient.enqueuedAt).getTime()).toBe(
      10_000,
    );
    world.advance(10);
    expect(await queue.until(impatient.id, (t) => t.status !== 'WAITING')).toMatchObject({
      status: 'EXPIRED',
      position: null,
      lease: null,
    });
    expect((await queue.ticket(patient.id)).position).toBe(1);
    ok(await world.release(agents[0], 'patience', generation));
    expect((await queue.ticket(patient.id)).status).toBe('GRANTED');
    expect((await queue.ticket(impatient.id)).status).toBe('EXPIRED');
  });

  // proves: R39
  test('a waiter is cancelled by its owner or an ADMIN, by nobody else', async () => {
    await world.createEnvironment('cancel', 'MONOTONIC');
    const generation = await world.acquire(agents[0], 'cancel');
    const b = await queue.enqueue(agents[1], 'cancel');
    const c = await queue.enqueue(agents[2], 'cancel');
    const d = await queue.enqueue(agents[3], 'cancel');
    expect(codeOf(await queue.cancel(agents[2], b.id))).toBe('FORBIDDEN');
    // The refusal is in the environment's audit log, as every refused decision is.
    expect(
      (await world.auditEvents('cancel')).filter((e) => e.action === 'CANCEL_LEASE_TICKET'),
    ).toEqual([
      expect.objectContaining({ outcome: 'REJECTED', code: 'FORBIDDEN', actor: 'agent-2' }),
    ]);
    expect(ok(await queue.cancel(agents[1], b.id)).cancelLeaseTicket).toMatchObject({
      status: 'CANCELLED',
      position: null,
    });
    expect(ok(await queue.cancel(ADMIN_TOKEN, c.id)).cancelLeaseTicket.status).toBe('CANCELLED');
    expect(codeOf(await queue.cancel(agents[1], '999999'))).toBe('NOT_FOUND');
    expect(codeOf(await queue.cancel(agents[1], 'x'))).toBe('BAD_USER_INPUT');
    expect((await queue.ticket(d.id)).position).toBe(1);
    ok(await world.release(agents[0], 'cancel', generation));
    expect((await queue.ticket(d.id)).status).toBe('GRANTED');
    // Cancelling a ticket that no longer waits changes nothing.
    expect(ok(await queue.cancel(agents[3], d.id)).cancelLeaseTicket.status).toBe('GRANTED');
    expect((await world.environment('cancel')).lease?.holder).toBe('agent-3');
  });

  // proves: R26
  test('a token limited to other environments may not read or watch a ticket outside them', async () => {
    await world.createEnvironment('scoped-q', 'MONOTONIC');
    const generation = await world.acquire(agents[0], 'scoped-q');
    const limited = ok(
      await world.gql<{ issueToken: { token: string } }>(
        world.admin,
        'mutation { issueToken(name: "agent-elsewhere", role: AGENT, environments: ["e*"]) { token } }',
      ),
    ).issueToken.token;
    const ticket = await queue.enqueue(agents[1], 'scoped-q');
    const unknownId = String(Number(ticket.id) + 100_000);

    // A ticket outside the token's environments and an id that names no ticket are answered
    // alike, byte for byte (the id aside): nothing tells the token that the first exists,
    // nor in which environment.
    const read = (id: string) =>
      world.gql(limited, 'query($id: ID!) { leaseTicket(id: $id) { id environment } }', { id });
    expect(ok(await read(ticket.id))).toEqual({ leaseTicket: null });
    expect(ok(await read(unknownId))).toEqual({ leaseTicket: null });

    const cancelOutside = await queue.cancel(limited, ticket.id);
    const cancelUnknown = await queue.cancel(limited, unknownId);
    expect(codeOf(cancelOutside)).toBe('NOT_FOUND');
    const shape = (result: typeof cancelOutside, id: string) =>
      JSON.stringify(result.errors).replaceAll(`lease ticket ${id} `, 'lease ticket <id> ');
    expect(shape(cancelOutside, ticket.id)).toBe(shape(cancelUnknown, unknownId));
    expect(JSON.stringify(cancelOutside.errors)).not.toContain('scoped-q');

    const watch = async (id: string) => {
      const socket = await RawSocket.admitted(app, limited);
      socket.subscribe('t', 'subscription($id: ID!) { leaseTicketChanged(id: $id) { id } }', {
        id,
      });
      const frame = await socket.next((f) => f.id === 't');
      socket.close();
      return frame;
    };
    const watchOutside = await watch(ticket.id);
    const watchUnknown = await watch(unknownId);
    expect(watchOutside?.type).toBe('error');
    expect(JSON.stringify(watchOutside?.payload)).toContain('NOT_FOUND');
    const frameShape = (frame: typeof watchOutside, id: string) =>
      JSON.stringify(frame?.payload).replaceAll(`lease ticket ${id} `, 'lease ticket <id> ');
    expect(frameShape(watchOutside, ticket.id)).toBe(frameShape(watchUnknown, unknownId));
    expect(JSON.stringify(watchOutside?.payload)).not.toContain('scoped-q');

    // The refusals are still audited in the ticket's environment (R27), never shown to the caller.
    const refusals = (await world.auditEvents('scoped-q')).filter(
      (e) => e.actor === 'agent-elsewhere',
    );
    expect(refusals.length).toBeGreaterThan(0);
    expect(refusals.every((e) => e.code === 'FORBIDDEN')).toBe(true);

    // The ticket waits on, untouched.
    expect((await queue.ticket(ticket.id)).status).toBe('WAITING');
    ok(await queue.cancel(agents[1], ticket.id));
    ok(await world.release(agents[0], 'scoped-q', generation));
  });

  // proves: R38
  test('acquireLease is refused while tickets wait, even its own holder and even once the lease is over', async () => {
    await world.createEnvironment('nojump', 'MONOTONIC');
    const lease = ok(await world.acquireRaw(agents[0], 'nojump', 10)).acquireLease;
    const b = await queue.enqueue(agents[1], 'nojump', { ttlSeconds: 30 });
    await queue.enqueue(agents[2], 'nojump');
    const refused = await world.acquireRaw(agents[3], 'nojump');
    expect(refused.errors![0].extensions).toEqual({
      code: 'LEASE_HELD',
      holder: 'agent-0',
      expiresAt: lease.expiresAt,
      queueLength: 2,
    });
    expect(refused.errors![0].message).toBe(
      'environment "nojump" is leased to agent-0 and 2 lease tickets wait',
    );
    expect(codeOf(await world.acquireRaw(agents[0], 'nojump'))).toBe('LEASE_HELD');

    // The lease is over: the acquire that finds it so hands it to the head, then is refused.
    world.advance(10);
    const after = await world.acquireRaw(agents[3], 'nojump');
    expect(after.errors![0].extensions).toMatchObject({
      code: 'LEASE_HELD',
      holder: 'agent-1',
      queueLength: 1,
    });
    expect((await queue.ticket(b.id)).status).toBe('GRANTED');
    expect((await world.environment('nojump')).lastIssuedGeneration).toBe(lease.generation + 1);
  });

  // proves: R39
  test('leaseTicketChanged starts with the ticket as it is, then its grant', async () => {
    await world.createEnvironment('told', 'MONOTONIC');
    const generation = await world.acquire(agents[0], 'told');
    const ticket = await queue.enqueue(agents[1], 'told');
    const socket = await RawSocket.admitted(app, agents[1]);
    socket.subscribe('t', `subscription($id: ID!) { leaseTicketChanged(id: $id) { ${TICKET} } }`, {
      id: ticket.id,
    });
    const items = () =>
      socket.frames
        .filter((f) => f.type === 'next' && f.id === 't')
        .map((f) => f.payload.data.leaseTicketChanged);
    await socket.next(() => items().length >= 1);
    expect(items()[0]).toMatchObject({ id: ticket.id, status: 'WAITING', position: 1 });
    ok(await world.release(agents[0], 'told', generation));
    await socket.next(() => items().length >= 2);
    expect(items()[1]).toMatchObject({ status: 'GRANTED', lease: { generation: generation + 1 } });
    socket.close();
  });
});

/** The ticket's first state that is not WAITING, as leaseTicketChanged tells it. */
async function firstDecided(app: TestApp, token: string, id: string): Promise<Ticket> {
  const socket = await RawSocket.admitted(app, token);
  try {
    socket.subscribe('t', `subscription($id: ID!) { leaseTicketChanged(id: $id) { ${TICKET} } }`, {
      id,
    });
    const frame = await socket.next(
      (f) =>
        f.id === 't' &&
        (f.type !== 'next' || f.payload.data?.leaseTicketChanged?.status !== 'WAITING'),
    );
    expect(frame?.type).toBe('next');
    return frame!.payload.data.leaseTicketChanged as Ticket;
  } finally {
    socket.close();
  }
}

const twoInstances = TEST_DATABASE === 'postgres' ? describe : describe.skip;

twoInstances('two instances on one PostgreSQL database', () => {
  let database: { url: string; cleanup: () => Promise<void> };
  let one: TestApp;
  let two: TestApp;

  beforeAll(async () => {
    database = await scratchDatabase(true);
    one = await startApp({ DATABASE_URL: database.url });
    two = await startApp({ DATABASE_URL: database.url });
  });
  afterAll(async () => {
    await Promise.allSettled([one?.close(), two?.close()]);
    await database?.cleanup();
  });

  // proves: R2, R37
  test('50 concurrent enqueues and releases through both: every generation granted once, to one ticket, in queue order', async () => {
    const world = new World(one);
    const queue = new Queue(world);
    await world.createEnvironment('busy', 'STRICT');
    ok(await queue.policy('busy', { maxQueueLength: 100 }));
    const tokens: string[] = [];
    for (let i = 0; i < 10; i++) tokens.push(await world.issue(`worker-${i}`, 'AGENT'));
    const apps = [one, two];

    const grants = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const token = tokens[i % 10];
        const app = apps[i % 2];
        const other = apps[(i + 1) % 2];
        const ticket = await queue.enqueue(token, 'busy', { instance: `w${i}` }, app);
        // Told on the instance it enqueued on; granted by the other's release (or at once).
        const granted = await firstDecided(app, token, ticket.id);
        expect(granted.status).toBe('GRANTED');
        const generation = granted.lease!.generation;
        const released = await other.gql(
          token,
          'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) }',
          { input: { environment: 'busy', generation } },
        );
        expect(codeOf(released)).toBe('OK');
        return { id: Number(ticket.id), generation };
      }),
    );
    const byGeneration = [...grants].sort((a, b) => a.generation - b.generation);
    expect(byGeneration.map((g) => g.generation)).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
    // Queue order: ticket ids grow with the generations they were granted.
    const ids = byGeneration.map((g) => g.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(50);
    const env = await world.environment('busy');
    expect(env.lastIssuedGeneration).toBe(50);
    expect(env.fence).toBe(50);
    expect(one.get(PgListener).listening && two.get(PgListener).listening).toBe(true);
  });
});
