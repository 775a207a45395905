/**
 * Large plans wait their turn: at most LARGE_PLANS_AT_ONCE are decided at once, the others
 * in arrival order; none is refused, and one that fails passes its turn on. While a request
 * with a large body is in flight, V8 collects garbage sooner, and only then.
 */
import {
  HeapGrowth,
  type HeapGrowthHooks,
  LARGE_BODY_BYTES,
  LARGE_BODY_HEAP_GROWTH_PERCENT,
} from '../src/limits/large-bodies.js';
import { LARGE_PLANS_AT_ONCE, LargePlanGate } from '../src/plans/large-plans.js';
import { startApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { rawConnection } from './support/raw-http.js';
import { until } from './support/until.js';

test('ten large submits together: at most two run at once, in arrival order, a failure passes its turn on', async () => {
  const gate = new LargePlanGate();
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
  expect(calls).toEqual([]);
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
