/**
 * Large plans wait their turn: at most LARGE_PLANS_AT_ONCE are decided at once, the others
 * in arrival order; none is refused, and one that fails passes its turn on. At most
 * LARGE_BODIES_AT_ONCE large bodies are read at once, the others wait unread in their sockets
 * (for half the request timeout at most). While a request with a large body is in flight, V8
 * collects garbage sooner, and only then. A large plan's steps (its body's parse, its hashing,
 * its write) each run from a turn of the event loop of their own.
 */
import {
  HeapGrowth,
  type HeapGrowthHooks,
  LARGE_BODIES_AT_ONCE,
  LARGE_BODY_BYTES,
  LARGE_BODY_HEAP_GROWTH_PERCENT,
} from '../src/limits/large-bodies.js';
import { FifoSemaphore } from '../src/common/fifo-semaphore.js';
import { HeavyQueryGate } from '../src/limits/heavy-queries.js';
import { LARGE_PLANS_AT_ONCE } from '../src/plans/large-plans.js';
import { startApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { rawConnection } from './support/raw-http.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

test('ten large submits together: at most two run at once, in arrival order, a failure passes its turn on', async () => {
  const gate = new FifoSemaphore(LARGE_PLANS_AT_ONCE);
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const release: (() => void)[] = [];
  const jobs = Array.from({ length: 10 }, (_, i) =>
    gate
      .run(async () => {
        running++;
        most = Math.max(most, running);
        started.push(i);
        await new Promise<void>((resolve) => release.push(resolve));
        running--;
        if (i === 3) throw new Error('refused by the guard');
        return i;
      })
      .then(
        (value) => ({ value }),
        (error: Error) => ({ error: error.message }),
      ),
  );
  // Let the waiting ones queue, then finish the jobs one by one in the order they started.
  for (let done = 0; done < 10; done++) {
    await new Promise((resolve) => setImmediate(resolve));
    expect(running).toBeLessThanOrEqual(LARGE_PLANS_AT_ONCE);
    release.shift()!();
  }
  const outcomes = await Promise.all(jobs);
  expect(most).toBe(LARGE_PLANS_AT_ONCE);
  expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  expect(outcomes.filter((o) => 'value' in o)).toHaveLength(9);
  expect(outcomes[3]).toEqual({ error: 'refused by the guard' });
  expect(gate.queued).toBe(0);
});

test('a turn started out of line counts, and when turns end the line is let in up to the width again', async () => {
  const turns = new FifoSemaphore(2);
  const [a, b, c, d, e] = Array.from({ length: 5 }, () => turns.take());
  expect([a, b, c, d, e].map((t) => t.started)).toEqual([true, true, false, false, false]);
  d.end(); // leaves the line before its turn
  e.startNow(); // waited long enough: starts beyond the width
  expect(turns.held).toBe(3);
  expect(turns.queued).toBe(1);
  a.end();
  // Three held, one ended: two still hold, which is the width; c keeps waiting.
  expect(c.started).toBe(false);
  b.end();
  await c.ready;
  expect(turns.held).toBe(2);
  expect(turns.queued).toBe(0);
  for (const t of [c, e, c]) t.end();
  expect(turns.held).toBe(0);
  expect(d.started).toBe(false);
});

test('an expensive request that waited its limit is refused RATE_LIMITED and leaves the line; the next in line gets the slot', async () => {
  const gate = new HeavyQueryGate(1, 50);
  const release = await gate.acquire();
  const refused = gate.acquire();
  await expect(refused).rejects.toMatchObject({ code: 'RATE_LIMITED' });
  const next = gate.acquire();
  release();
  const releaseNext = await next;
  // The refused one took no slot: the next one's release frees the only one.
  releaseNext();
  (await gate.acquire())();
});

/** HeapGrowth's hooks, recorded: the flags set, the collections run, the timer pending. */
function recordedHooks() {
  const calls: string[] = [];
  let pending: (() => void) | null = null;
  const hooks: HeapGrowthHooks = {
    set: (flag) => calls.push(flag),
    collect: () => calls.push('collect'),
    later: (job) => {
      pending = job;
      return () => (pending = null);
    },
  };
  return { calls, hooks, fire: () => pending?.(), pending: () => pending !== null };
}

test('a burst of large requests tightens heap growth once, with one full collection, until it has been quiet a while', () => {
  const { calls, hooks, fire, pending } = recordedHooks();
  const growth = new HeapGrowth(LARGE_BODY_HEAP_GROWTH_PERCENT, [], hooks);
  const tight = `--heap-growing-percent=${LARGE_BODY_HEAP_GROWTH_PERCENT}`;
  const first = growth.hold();
  const second = growth.hold();
  expect(calls).toEqual([tight, 'collect']);
  first();
  first(); // a second release of the same request counts once
  expect(growth.held).toBe(1);
  second();
  expect(growth.held).toBe(0);
  // Quiet, but not for long yet: a new large request finds growth still tight.
  expect(pending()).toBe(true);
  const third = growth.hold();
  expect(pending()).toBe(false);
  expect(calls).toEqual([tight, 'collect']);
  third();
  fire();
  expect(growth.tightened).toBe(false);
  expect(calls).toEqual([tight, 'collect', '--heap-growing-percent=0']);
  // The next burst starts again with a collection.
  growth.hold()();
  expect(calls).toEqual([tight, 'collect', '--heap-growing-percent=0', tight, 'collect']);
});

test("an operator's --heap-growing-percent is left as given", () => {
  const { calls, hooks } = recordedHooks();
  const growth = new HeapGrowth(
    LARGE_BODY_HEAP_GROWTH_PERCENT,
    ['--heap-growing-percent=50'],
    hooks,
  );
  expect(growth.managed).toBe(false);
  growth.hold()();
  growth.settle();
  expect(calls).toEqual([]);
});

test('a started service settles its heap once: one full collection with the tighter growth, then V8 decides again', () => {
  const { calls, hooks } = recordedHooks();
  const growth = new HeapGrowth(LARGE_BODY_HEAP_GROWTH_PERCENT, [], hooks);
  const tight = `--heap-growing-percent=${LARGE_BODY_HEAP_GROWTH_PERCENT}`;
  growth.settle();
  expect(calls).toEqual([tight, 'collect', '--heap-growing-percent=0']);
  expect(growth.tightened).toBe(false);
  // A burst in progress already keeps growth tight: settling changes nothing then.
  const release = growth.hold();
  calls.length = 0;
  growth.settle();
  expect(calls).toEqual([]);
  release();
});

/** Opens a POST /graphql declaring `declared` bytes and sends `sent` of them. */
async function partialPost(url: string, declared: number, sent: number) {
  const connection = await rawConnection(url);
  connection.socket.write(
    `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  connection.socket.write(' '.repeat(sent));
  return connection;
}

test('a large body counts from its headers until its answer, or until its client is gone; small ones never count', async () => {
  const app = await startApp();
  try {
    const inFlight = () => metric(app.url, 'planfence_large_requests_in_flight');
    expect(await inFlight()).toBe(0);
    // A small request that is still arriving does not count.
    const small = await partialPost(app.url, 1000, 10);
    // A large one counts while its body arrives...
    const answered = await partialPost(app.url, LARGE_BODY_BYTES + 1, 64 * 1024);
    const dropped = await partialPost(app.url, 2 * LARGE_BODY_BYTES, 1024);
    await until('two large requests in flight', async () => (await inFlight()) === 2);
    expect(await metric(app.url, 'planfence_heap_growth_tightened')).toBe(1);
    // ...until its client goes away,
    dropped.socket.destroy();
    await until('the dropped one no longer counts', async () => (await inFlight()) === 1);
    // ...or it is answered (here: a body that is no GraphQL request, refused as bad input).
    answered.socket.write(' '.repeat(LARGE_BODY_BYTES + 1 - 64 * 1024));
    await until('the large request answered', () => /^HTTP\/1\.1 400 /.test(answered.received()));
    await until('no large request in flight', async () => (await inFlight()) === 0);
    answered.socket.destroy();
    small.socket.destroy();
  } finally {
    await app.close();
  }
});

test('a third large body waits unread until one of the two before it is answered; a client that leaves the line takes no turn', async () => {
  const app = await startApp();
  try {
    const waiting = () => metric(app.url, 'planfence_large_bodies_waiting');
    const first = await partialPost(app.url, LARGE_BODY_BYTES + 1, 64 * 1024);
    const second = await partialPost(app.url, LARGE_BODY_BYTES + 1, 1024);
    await until(
      'two large requests in flight',
      async () =>
        (await metric(app.url, 'planfence_large_requests_in_flight')) === LARGE_BODIES_AT_ONCE,
    );
    // The third sends its whole body; it is not read while the two hold their turns.
    const third = await partialPost(app.url, LARGE_BODY_BYTES + 1, LARGE_BODY_BYTES + 1);
    await until('the third waits', async () => (await waiting()) === 1);
    const leaver = await partialPost(app.url, LARGE_BODY_BYTES + 1, 1024);
    await until('the fourth waits too', async () => (await waiting()) === 2);
    leaver.socket.destroy();
    await until('the one that left is out of the line', async () => (await waiting()) === 1);
    expect(await waiting()).toBe(1);
    expect(third.received()).toBe('');
    // The first is answered (a body that is no GraphQL request): its turn passes to the third.
    first.socket.write(' '.repeat(LARGE_BODY_BYTES + 1 - 64 * 1024));
    await until('the first answered', () => /^HTTP\/1\.1 400 /.test(first.received()));
    await until('the third answered', () => /^HTTP\/1\.1 400 /.test(third.received()));
    expect(await waiting()).toBe(0);
    // The second still holds its turn, unfinished; a small request never waits for it.
    const small = await app.gql(null, '{ __typename }');
    expect(small.data).toEqual({ __typename: 'Query' });
    expect(second.received()).toBe('');
    for (const c of [first, second, third]) c.socket.destroy();
  } finally {
    await app.close();
  }
});

test('a large body that waited half the request timeout is read anyway, before the ones holding the turns time out', async () => {
  // Requests must be complete within 6 s, so a large body waits at most 3 s for its turn.
  const app = await startApp({
    PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS: '6',
    PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS: '6',
  });
  try {
    const holders = [
      await partialPost(app.url, LARGE_BODY_BYTES + 1, 1024),
      await partialPost(app.url, LARGE_BODY_BYTES + 1, 1024),
    ];
    await until(
      'two large requests in flight',
      async () =>
        (await metric(app.url, 'planfence_large_requests_in_flight')) === LARGE_BODIES_AT_ONCE,
    );
    const late = await partialPost(app.url, LARGE_BODY_BYTES + 1, LARGE_BODY_BYTES + 1);
    await until(
      'it waits',
      async () => (await metric(app.url, 'planfence_large_bodies_waiting')) === 1,
    );
    await until('it is read and answered', () => /^HTTP\/1\.1 400 /.test(late.received()));
    // The two that held the turns are still waiting for their bodies: nothing answered them.
    expect(holders.map((h) => h.received())).toEqual(['', '']);
    expect(await metric(app.url, 'planfence_large_bodies_waiting')).toBe(0);
    for (const c of [...holders, late]) c.socket.destroy();
  } finally {
    await app.close();
  }
});

test("a large plan's parse, hashing and write each run from a turn of the event loop of their own; a small plan's take none", async () => {
  const app = await startApp();
  try {
    const world = new World(app);
    const agent = await world.issue('agent', 'AGENT');
    await world.createEnvironment('big', 'MONOTONIC', false);
    const generation = await world.acquire(agent, 'big', 600);
    const turnsOf = async (content: string) => {
      const before = app.turnsTaken();
      await world.submitOk(agent, 'big', generation, content);
      return app.turnsTaken() - before;
    };
    expect(await turnsOf('small plan')).toBe(0);
    // After the body's parse (the request's handler), after its turn among large plans
    // (before its hashing), before its write: /health and the small requests are served
    // between them instead of behind a 1 MiB plan's whole way through.
    expect(await turnsOf(`large ${'x'.repeat(LARGE_BODY_BYTES)}`)).toBe(3);
  } finally {
    await app.close();
  }
});
