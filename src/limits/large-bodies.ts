import type { FastifyInstance, FastifyRequest } from 'fastify';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Gauge, type Registry } from 'prom-client';
import { perProcess } from '../common/per-process.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';
import { loopTurns } from '../common/loop-turns.js';

/**
 * A request whose declared body is larger than this is a large request: a 1 MiB plan
 * makes about ten plan-sized strings and objects on its way through (docs/operations.md#memory).
 */
export const LARGE_BODY_BYTES = 256 * 1024;

/**
 * How far V8 lets its old generation grow past what survived the last full collection
 * while large requests arrive, in percent. Outside those moments V8's own heuristics hold
 * (on a machine with much memory they let the heap grow up to four times what survived
 * before collecting, which is what makes large plans' dead copies pile up).
 */
export const LARGE_BODY_HEAP_GROWTH_PERCENT = 25;

/**
 * Large bodies one service reads at once. The others wait in their sockets, unread, in
 * arrival order: a client sending one only waits longer (TCP holds the rest of its body).
 */
export const LARGE_BODIES_AT_ONCE = 2;

/**
 * The longest a large body waits for its turn; then it is read anyway (the request must be
 * complete within PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS, so it waits at most half of that).
 * Two slow clients holding the turns delay the others by this much, no more.
 */
export const LARGE_BODY_MAX_WAIT_MS = 10_000;

/** How long the tighter growth outlives the last large request (a burst's pauses keep it). */
export const LARGE_BODY_LINGER_MS = 10_000;

const FLAG = '--heap-growing-percent';

/**
 * V8's full collection, from a context created with the gc extension; where V8 refuses it,
 * nothing (the tighter growth then applies from V8's next collection on).
 */
function fullCollection(): () => void {
  try {
    v8.setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return () => undefined;
  }
}

export interface HeapGrowthHooks {
  /** Sets a V8 flag (v8.setFlagsFromString). */
  set(flag: string): void;
  /** Runs a full collection now. */
  collect(): void;
  /** Runs `job` after `ms` (an unref'd timer); returns its cancel. */
  later(job: () => void, ms: number): () => void;
}

let gc: (() => void) | undefined;
const V8_HOOKS: HeapGrowthHooks = {
  set: (flag) => v8.setFlagsFromString(flag),
  collect: () => (gc ??= fullCollection())(),
  later: (job, ms) => {
    const timer = setTimeout(job, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * Tightens V8's heap growth while large requests arrive: from the first one of a burst until
 * LARGE_BODY_LINGER_MS after the last one ends; then V8's own heuristics come back. The
 * setting is V8's `--heap-growing-percent`, which V8 reads when a full collection sets the
 * next limit, so a burst starts with one full collection (a few milliseconds on the service's
 * heap): the limit the heap reached under small requests would otherwise let the first large
 * ones pile up to it. A process started with that flag (on its command line: Node refuses it
 * in `NODE_OPTIONS`) keeps the operator's value: nothing is then changed or collected.
 */
export class HeapGrowth {
  private holders = 0;
  /** Set while the last burst's linger runs. */
  private cancelRelax: (() => void) | null = null;
  readonly managed: boolean;

  constructor(
    private readonly percent: number = LARGE_BODY_HEAP_GROWTH_PERCENT,
    flags: string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)],
    private readonly hooks: HeapGrowthHooks = V8_HOOKS,
    private readonly lingerMs: number = LARGE_BODY_LINGER_MS,
  ) {
    this.managed = percent > 0 && !flags.some((flag) => flag.startsWith(FLAG));
  }

  /** Holds the tighter growth until the returned function is called (once; later calls do nothing). */
  hold(): () => void {
    if (!this.managed) return () => undefined;
    if (!this.tightened) this.tighten();
    this.holders++;
    this.cancelRelax?.();
    this.cancelRelax = null;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holders > 0) return;
      this.cancelRelax = this.hooks.later(() => {
        this.cancelRelax = null;
        this.relax();
      }, this.lingerMs);
    };
  }

  /**
   * Once the service has started: one full collection with the tighter growth, then V8's
   * own heuristics again. V8 sets the heap's next limit at each full collection, and the
   * last one of the start-up, while nothing else was running, let the heap grow to about
   * four times what survived it (on a 2-core machine, 39 MiB became a limit near 165 MiB):
   * under the first half minute of load the heap then filled with garbage to that limit,
   * and the process's resident size with it (270 MiB), before the first collection under
   * load brought it back to what survives (about 50 MiB) and V8's later limits stayed near
   * 1.5 times that. Settling sets the first limit from what the started service holds
   * instead. Nothing when an operator's flag is set or a burst holds the tighter growth.
   */
  settle(): void {
    if (!this.managed || this.tightened) return;
    this.tighten();
    this.relax();
  }

  /** The tighter growth, and a full collection so that the next limit follows it. */
  private tighten(): void {
    this.hooks.set(`${FLAG}=${this.percent}`);
    this.hooks.collect();
  }

  /** V8's own heuristics from its next full collection on. */
  private relax(): void {
    this.hooks.set(`${FLAG}=0`);
  }

  /** Requests holding it now. */
  get held(): number {
    return this.holders;
  }

  /** Whether V8 runs with the tighter growth now. */
  get tightened(): boolean {
    return this.holders > 0 || this.cancelRelax !== null;
  }
}

/**
 * The process's one HeapGrowth: the setting is the process's, so every app of a process
 * (tests run several) counts its holders in the same place.
 */
export function processHeapGrowth(): HeapGrowth {
  return perProcess('heapGrowth', () => new HeapGrowth());
}

/** Whether a request declares (Content-Length) a large body. */
function declaresLargeBody(request: FastifyRequest): boolean {
  return Number(request.headers['content-length']) > LARGE_BODY_BYTES;
}

/**
 * From the moment a request declares a large body (Content-Length) until its connection has
 * its answer or is gone, V8 collects garbage sooner: the copies a large plan leaves behind
 * are collected before the next ones pile on them. Small requests never change anything.
 */
export function collectSoonerForLargeBodies(
  fastify: FastifyInstance,
  growth: HeapGrowth = processHeapGrowth(),
): HeapGrowth {
  if (!growth.managed) return growth;
  fastify.addHook('onRequest', (request, reply, done) => {
    if (declaresLargeBody(request)) {
      const release = growth.hold();
      // 'close' comes once the answer is sent or the connection dropped, whichever is first.
      reply.raw.once('close', release);
    }
    done();
  });
  return growth;
}

/**
 * A request that declares a large body (Content-Length) is read only in its turn: at most
 * LARGE_BODIES_AT_ONCE at once, from its headers until its answer is sent or its client is
 * gone. Ten clients sending 1 MiB plans together then hold two plans' copies in memory, not
 * ten, and are answered in arrival order. Once read and parsed (several milliseconds of the
 * request thread for 1 MiB of JSON), such a request is handled from the event loop's next
 * turn (common/loop-turns.ts): what arrived meanwhile, `/health` included, is served between
 * its parse and the rest of its work. Small requests never wait.
 */
export function readLargeBodiesInTurn(
  fastify: FastifyInstance,
  requestTimeoutMs: number,
  turns: FifoSemaphore = new FifoSemaphore(LARGE_BODIES_AT_ONCE),
): FifoSemaphore {
  const maxWaitMs = Math.min(LARGE_BODY_MAX_WAIT_MS, requestTimeoutMs / 2);
  fastify.addHook('onRequest', (request, reply, done) => {
    if (!declaresLargeBody(request)) return done();
    const turn = turns.take();
    const timer = turn.started ? undefined : setTimeout(turn.startNow, maxWaitMs);
    // 'close' comes once the answer is sent or the client is gone. A client gone while it
    // waits leaves the line, and its request goes no further.
    reply.raw.once('close', () => {
      clearTimeout(timer);
      turn.end();
    });
    void turn.ready.then(() => {
      clearTimeout(timer);
      done();
    });
  });
  fastify.addHook('preHandler', (request, _reply, done) => {
    if (!declaresLargeBody(request)) return done();
    void loopTurns.turn().then(() => done());
  });
  return turns;
}

/**
 * `planfence_large_requests_in_flight`: requests with a large body being received or
 * answered, in this process; `planfence_heap_growth_tightened`: 1 while V8 collects sooner.
 */
export function largeRequestsGauges(
  registry: Registry,
  growth: HeapGrowth,
  bodies: FifoSemaphore,
): void {
  new Gauge({
    name: 'planfence_large_bodies_waiting',
    help: `Requests declaring a body over ${LARGE_BODY_BYTES / 1024} KiB that wait, unread, for one of the ${LARGE_BODIES_AT_ONCE} turns to read one`,
    registers: [registry],
    collect() {
      this.set(bodies.queued);
    },
  });
  new Gauge({
    name: 'planfence_large_requests_in_flight',
    help: `Requests declaring a body over ${LARGE_BODY_BYTES / 1024} KiB, from their headers until their answer is sent`,
    registers: [registry],
    collect() {
      this.set(growth.held);
    },
  });
  new Gauge({
    name: 'planfence_heap_growth_tightened',
    help: growth.managed
      ? `1 while V8's heap may grow only ${LARGE_BODY_HEAP_GROWTH_PERCENT}% past what survived its last full collection: from the first large request of a burst until ${LARGE_BODY_LINGER_MS / 1000} s after the last`
      : 'Always 0: the process was started with --heap-growing-percent, which is left as given',
    registers: [registry],
    collect() {
      this.set(growth.tightened ? 1 : 0);
    },
  });
}
