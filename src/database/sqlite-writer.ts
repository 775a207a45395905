import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { Logger } from '@nestjs/common';
import { stopWorker } from '../common/stop-worker.js';
import type { Statement } from 'better-sqlite3';
import type { DatabaseConfig } from '../config/config.js';
import { writerWorkerMain } from './writer-worker.js';

/**
 * A write the writer thread can run: a self-contained function (it runs in the thread from
 * its source text, reaching nothing of its module) of the thread's prepared statements, the
 * statement texts it names (`sql`, sent once with it) and the write's input. It returns the
 * write's value; if it throws, what it wrote is rolled back, and only that.
 */
export interface WriterProgram<I, O> {
  name: string;
  sql: Record<string, string>;
  run: (statement: (sql: string) => Statement, sql: Record<string, string>, input: I) => O;
}

/** One write of a group, as the thread is sent it. */
export interface ThreadWrite {
  program: WriterProgram<never, unknown>;
  input: unknown;
}

/** What became of one write of a committed group. */
export type ThreadOutcome = { value: unknown } | { error: Error };

/** Whether the service decides a database file's common submits on a writer thread. */
export function hasWriterThread(db: DatabaseConfig): db is DatabaseConfig & { kind: 'sqlite' } {
  return db.kind === 'sqlite' && db.path !== ':memory:' && db.writerThread;
}

/** How long a stopping writer thread may take to close its connection before it is ended. */
const STOP_GRACE_MS = 2_000;

/**
 * SQLite file: a thread of its own with a connection of its own (src/database/writer-worker.ts),
 * to which the service hands whole writes (WriterProgram) in groups; the thread runs each
 * group's statements and its COMMIT, with its fsync, and answers once the group is durable.
 * The request thread meanwhile serves requests. GroupCommit never runs a group of the
 * service's connection at once with the thread's, so the two never wait on SQLite's lock.
 */
export class SqliteWriter {
  private readonly logger = new Logger('Storage');
  private worker: Worker | null = null;
  private readonly defined = new Set<string>();
  private nextGroup = 1;
  private readonly pending = new Map<
    number,
    { resolve: (outcomes: ThreadOutcome[]) => void; reject: (error: Error) => void }
  >();

  constructor(
    private readonly path: string,
    /** The service connection's settings, run on the thread's connection as it opens. */
    private readonly pragmas: string[],
  ) {}

  /** Whether writes can be handed to the thread (it started and has not stopped). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Starts the thread; resolves once its connection is open. */
  start(): Promise<void> {
    const worker = new Worker(`(${writerWorkerMain.toString()})()`, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        path: this.path,
        pragmas: this.pragmas,
      },
      // Its young objects are a group's messages: a smaller nursery than the request thread's.
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    });
    worker.unref();
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (message: WriterMessage) => {
        if ('ready' in message) {
          this.worker = worker;
          return resolve();
        }
        const waiting = this.pending.get(message.group);
        if (!waiting) return;
        this.pending.delete(message.group);
        if ('failed' in message) return waiting.reject(codedError(message.failed));
        waiting.resolve(
          message.outcomes.map((outcome) =>
            'error' in outcome ? { error: codedError(outcome.error) } : outcome,
          ),
        );
      });
      const ended = (error: Error) => {
        reject(error);
        if (this.worker !== worker) return;
        this.worker = null;
        this.logger.error(
          `the writer thread stopped (${error.message}); writes run on the request thread`,
        );
        this.refusePending(error);
      };
      worker.on('error', ended);
      worker.on('exit', () => ended(new Error('the writer thread exited')));
    });
  }

  /**
   * Runs `writes` in one transaction on the thread; resolves with each one's outcome once
   * the transaction committed (a write that threw is undone alone, and its outcome is its
   * error). Rejects if the transaction as a whole failed (nothing of it committed), with the
   * error SQLite gave (its `code`).
   */
  commit(writes: ThreadWrite[]): Promise<ThreadOutcome[]> {
    const worker = this.worker;
    if (!worker) return Promise.reject(new Error('the writer thread is not running'));
    for (const { program } of writes) {
      if (this.defined.has(program.name)) continue;
      const { name, sql, run } = program;
      worker.postMessage({ define: { name, sql, source: run.toString() } });
      this.defined.add(name);
    }
    const group = this.nextGroup++;
    return new Promise<ThreadOutcome[]>((resolve, reject) => {
      this.pending.set(group, { resolve, reject });
      worker.postMessage({
        group,
        writes: writes.map(({ program, input }) => ({ program: program.name, input })),
      });
    });
  }

  /**
   * Closes the thread's connection and ends the thread. The groups handed to it before are
   * answered first; one it has not answered within `graceMs` (it was ended in the middle of
   * it) is rejected: whether it committed is unknown, as after a crash.
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.worker = null;
    await stopWorker(worker, graceMs);
    this.refusePending(new Error('the writer thread was stopped before it answered this group'));
  }

  /** The groups handed to the thread that it will never answer: whether they committed is unknown. */
  private refusePending(error: Error): void {
    for (const { reject } of this.pending.values()) reject(error);
    this.pending.clear();
  }
}

type WriterMessage =
  | { ready: true }
  | { group: number; failed: CodedFailure }
  | { group: number; outcomes: ({ value: unknown } | { error: CodedFailure })[] };

interface CodedFailure {
  message: string;
  code: string | null;
}

/** The thread's error as an Error with SQLite's code, as the service's own connection throws it. */
function codedError({ message, code }: CodedFailure): Error {
  return Object.assign(new Error(message), code ? { code } : {});
}
