import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { Logger } from '@nestjs/common';
import { stopWorker } from '../common/stop-worker.js';
import type { DatabaseConfig } from '../config/config.js';
import { checkpointWorkerMain } from './checkpoint-worker.js';

/**
 * WAL frames (pages) waiting to be copied back at which the thread checkpoints: SQLite's own
 * default for a connection's checkpoint on commit, so that the thread does the work that
 * connection would have done, as often.
 */
export const CHECKPOINT_PAGES = 1000;
/** Frames fewer than that are copied back once they have waited this long. */
export const CHECKPOINT_IDLE_MS = 1000;

/** Whether the service runs a checkpoint thread for this database: a SQLite file, unless turned off. */
export function hasCheckpointThread(db: DatabaseConfig): db is DatabaseConfig & { kind: 'sqlite' } {
  return db.kind === 'sqlite' && db.path !== ':memory:' && db.checkpointMs > 0;
}

/** How long a stopping checkpoint thread may take to close its connection before it is ended. */
const STOP_GRACE_MS = 2_000;

/**
 * SQLite file: a thread of its own that checkpoints the WAL (src/database/checkpoint-worker.ts),
 * so that copying committed pages back into the database file, and the fsync that follows,
 * happen beside the request thread instead of on it. It looks every `intervalMs` and
 * checkpoints at CHECKPOINT_PAGES waiting, or when some have waited CHECKPOINT_IDLE_MS. The
 * service's connection keeps its automatic checkpoint, at WAL_BOUND_PAGES, as the bound on the
 * WAL's size: it only copies what this thread has not copied yet, and skips when this thread
 * is checkpointing (PASSIVE).
 */
export class SqliteCheckpointer {
  private readonly logger = new Logger('Storage');
  private worker: Worker | null = null;
  /** Checkpoints that copied frames, and the frames (pages) they copied. */
  readonly done = { runs: 0, frames: 0 };
  private lastFailure: string | null = null;

  constructor(
    private readonly path: string,
    private readonly synchronous: string,
    private readonly intervalMs: number,
  ) {}

  /** Starts the thread; resolves once its connection is open. */
  start(): Promise<void> {
    const worker = new Worker(`(${checkpointWorkerMain.toString()})()`, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        path: this.path,
        synchronous: this.synchronous,
        intervalMs: this.intervalMs,
        pages: CHECKPOINT_PAGES,
        idleMs: CHECKPOINT_IDLE_MS,
      },
      resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 4 },
    });
    worker.unref();
    this.worker = worker;
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (message: { ready?: true; frames?: number; failed?: string }) => {
        if (message.ready) return resolve();
        if (message.frames) {
          this.done.runs++;
          this.done.frames += message.frames;
          this.lastFailure = null;
        } else if (message.failed && message.failed !== this.lastFailure) {
          // Said once per distinct failure: the service's own automatic checkpoint still bounds the WAL.
          this.lastFailure = message.failed;
          this.logger.warn(`the checkpoint thread's checkpoint failed: ${message.failed}`);
        }
      });
      worker.on('error', (error) => {
        reject(error);
        if (this.worker === worker) {
          this.worker = null;
          this.logger.warn(
            `the checkpoint thread stopped (${error.message}); the service's connection checkpoints alone`,
          );
        }
      });
      worker.on('exit', () => {
        reject(new Error('the checkpoint thread exited'));
        if (this.worker === worker) this.worker = null;
      });
    });
  }

  /** Closes the thread's connection and ends the thread. */
  async stop(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.worker = null;
    await stopWorker(worker, STOP_GRACE_MS);
  }
}
