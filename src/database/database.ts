import {
  Inject,
  Injectable,
  Logger,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import type { Socket } from 'node:net';
import { DataSource, type EntityManager, type QueryRunner } from 'typeorm';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { checkMarker, sqliteFiles } from './sqlite-files.js';
import { hasCheckpointThread, SqliteCheckpointer } from './sqlite-checkpointer.js';
import { isConflict, MAX_ATTEMPTS } from './conflicts.js';
import { GroupCommit } from './group-commit.js';
import { hasWriterThread, SqliteWriter, type WriterProgram } from './sqlite-writer.js';
import { sqlitePragmas } from './sqlite-pragmas.js';
import { migrate } from './migrator.js';
import { execute, executeLater, openLater, takeLater } from './sql.js';
import { Transaction } from './transaction.js';
import { StorageError, StorageMonitor } from './storage.js';
import { FifoSemaphoresByKey } from '../common/fifo-semaphore.js';

export { changedOrRetry, RetryTransaction } from './conflicts.js';

/**
 * PostgreSQL: a token the transaction checks still names this principal, unrevoked
 * (`planfence_check_token`), sent with its BEGIN; see `Database.write`.
 */
export interface TokenCheck {
  name: string;
  tokenHash: string;
}

/** SQLite file: the writer thread connection's page cache, at most (MiB). */
const WRITER_CACHE_MIB = 2;

/** The SQLSTATE `planfence_check_token` raises. */
const TOKEN_CHECK_FAILED = 'PF401';

/** Whether a write failed because its token check did (the message says why: revoked or unknown). */
export function isTokenCheckFailure(error: unknown): error is Error {
  return (
    (error as { driverError?: { code?: string } } | null)?.driverError?.code === TOKEN_CHECK_FAILED
  );
}
export { execute, executeLater, jsonList, select, selectLater, updateReturning } from './sql.js';

/**
 * The one way the service reaches its database.
 *
 * On SQLite every transaction and every read of the service's connection runs alone, one
 * after the other: TypeORM shares that connection, so concurrent transactions would nest
 * or lose updates, and a read in between would see uncommitted rows. On a SQLite file the
 * writer thread's connection commits the writes handed to it (writeOnThread) in groups of
 * its own, never at once with a write group of the service's connection; reads of the
 * service's connection run beside them and see what was committed.
 * On PostgreSQL each transaction has its own pooled connection and row locks order writers.
 */
@Injectable()
export class Database implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(Database.name);
  private readonly serialized: boolean;
  private tail: Promise<unknown> = Promise.resolve();
  /** SQLite: the writes that arrive together share one commit. */
  private readonly group: GroupCommit;
  /**
   * Transactions committed, and the writes they carried (more than one per commit with group
   * commit), of them the writer thread's; on SQLite, the milliseconds writes waited for their
   * group to begin (GroupCommit).
   */
  readonly commits = { transactions: 0, writes: 0, onThread: 0, queuedMs: 0 };

  /** PostgreSQL: each environment's decisions in the database at once (writeFor()); null on SQLite. */
  private readonly decisionsByEnvironment: FifoSemaphoresByKey | null;
  /**
   * PostgreSQL: by environment, the decisions at once (writeGatheredFor) gathered for the next
   * transaction of that environment, while it waits for its turn.
   */
  private readonly gathering = new Map<string, Gathered[]>();
  /** Decisions that joined a gathered group still waiting in line (its first one is the line's). */
  private joinedWaiting = 0;

  /** Whether writes can succeed (see StorageMonitor); /health reports it. */
  readonly storage: StorageMonitor;
  private storageTimer: NodeJS.Timeout | undefined;
  /** SQLite file: the thread that checkpoints the WAL beside the request thread; else null. */
  readonly checkpointer: SqliteCheckpointer | null;
  /** SQLite file: the thread that commits the writes handed to it (writeOnThread); else null. */
  private readonly writer: SqliteWriter | null;
  private probing: Promise<void> | null = null;

  constructor(
    readonly dataSource: DataSource,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.serialized = dataSource.options.type === 'better-sqlite3';
    const db = config.database;
    this.decisionsByEnvironment =
      db.kind === 'postgres' ? new FifoSemaphoresByKey(db.decisionsPerEnvironment) : null;
    this.storage = new StorageMonitor(
      db.kind === 'sqlite' && db.path !== ':memory:' ? sqliteFiles(db.path) : null,
      config.storage.writeFailureMs,
    );
    this.checkpointer = hasCheckpointThread(db)
      ? new SqliteCheckpointer(db.path, db.synchronous, db.checkpointMs)
      : null;
    this.writer = hasWriterThread(db)
      ? new SqliteWriter(db.path, [
          ...sqlitePragmas(db),
          // It writes where the last submits wrote, and reads little else: a smaller cache.
          `cache_size = -${Math.min(db.cacheMiB, WRITER_CACHE_MIB) * 1024}`,
        ])
      : null;
    this.group = new GroupCommit(
      dataSource,
      this.storage,
      this.commits,
      (work) => this.exclusive(work),
      this.writer,
    );
  }

  get dialect(): 'sqlite' | 'postgres' {
    return this.serialized ? 'sqlite' : 'postgres';
  }

  /**
   * Runs pending migrations before anything else touches the database; then checks that the
   * database is the one its folder held, and whether it takes writes.
   */
  async onModuleInit(): Promise<void> {
    await migrate(this.dataSource, this.logger);
    try {
      await this.checkIdentity();
    } catch (error) {
      await this.dataSource.destroy().catch(() => undefined);
      throw error;
    }
    this.storage.recordOpenedFiles();
    await this.checkpointer?.start().catch((error: unknown) => {
      this.logger.warn(
        `the checkpoint thread did not start (${String(error)}); the service's connection checkpoints alone`,
      );
    });
    await this.writer?.start().catch((error: unknown) => {
      this.logger.warn(
        `the writer thread did not start (${String(error)}); writes run on the request thread`,
      );
    });
    // Notices a lost file without traffic, and writability coming back (disk space freed).
    this.storageTimer = setInterval(() => {
      if (!this.storage.lost() && this.storage.unwritable) this.probeWrite().catch(() => undefined);
    }, this.config.storage.checkIntervalMs);
    this.storageTimer.unref();
    await this.probeWrite().catch((error: unknown) => {
      if (!(error instanceof StorageError)) throw error;
      this.logger.error(`the database takes no writes (${error.message}): /health answers 503`);
    });
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.storageTimer);
    // The thread commits the groups it holds before it stops ('stop' comes after them).
    await this.writer?.stop();
    await this.checkpointer?.stop();
  }

  /** SQLite file: the database id must match the folder's marker (written on first start). */
  private async checkIdentity(): Promise<void> {
    const files = this.storage.files;
    if (!files) return;
    const [row] = await this.read((m) =>
      m.query<{ id: string }[]>('SELECT id FROM storage_identity LIMIT 1'),
    );
    if (!row) throw new Error('storage_identity has no row');
    checkMarker(files, row.id, { initialize: this.config.storage.initialize });
  }

  /**
   * A real small write (the probe column of storage_identity), committed like any other;
   * the one proof that the database takes writes again. Concurrent callers share one probe.
   */
  probeWrite(): Promise<void> {
    this.probing ??= this.run(true, async (m) => {
      await execute(m, 'UPDATE storage_identity SET probed_at = :now', { now: Date.now() });
    })
      .then(() => this.storage.succeeded())
      .finally(() => {
        this.probing = null;
      });
    return this.probing;
  }

  /**
   * Why the service is not ready to take writes, or null: the SQLite file was deleted or
   * replaced; the last write failed for a storage reason and a probe write fails too; the
   * database does not answer.
   */
  async storageProblem(): Promise<string | null> {
    const lost = this.storage.lost();
    if (lost) return lost;
    // The probe's small write may fit where a plan does not (a nearly full disk).
    const recent = this.storage.recentWriteFailure();
    if (recent) return recent;
    if (this.storage.unwritable) {
      try {
        await this.probeWrite();
      } catch (error) {
        return error instanceof StorageError
          ? (this.storage.unwritable ?? error.message)
          : 'the database does not answer';
      }
      return null;
    }
    try {
      await this.read((m) => m.query('SELECT 1'));
    } catch {
      return 'the database does not answer';
    }
    return null;
  }

  /**
   * Runs `work` in one transaction; commits when it resolves, rolls back when it throws.
   * Its promise settles only after the commit (or the rollback).
   *
   * On SQLite, the writes that arrive together are committed together (group commit): one
   * transaction with one savepoint per write, so each write's statements see the writes
   * before it and a write that throws rolls back to its own savepoint only; one COMMIT (one
   * fsync at synchronous=FULL) then makes all of them durable at once, and only then is any
   * of them answered. If the transaction as a whole fails, every write in it fails.
   *
   * `token` (PostgreSQL): the transaction first checks that this token still names this
   * principal, unrevoked, in the round trip of its BEGIN; if not, it rolls back and fails
   * (isTokenCheckFailure). On SQLite the service hears every change of a principal at its
   * commit, so there is nothing to check.
   */
  write<T>(work: (manager: Transaction) => Promise<T>, token?: TokenCheck): Promise<T> {
    return this.run(false, work, token);
  }

  /** Whether writes may be handed to the writer thread (writeOnThread). */
  get writesOnThread(): boolean {
    return this.writer?.running ?? false;
  }

  /**
   * SQLite file, while writesOnThread: a write the writer thread runs, `program` of `input`
   * (a whole decision, as PostgreSQL's submit at once is one statement), committed as
   * write()'s are, in a group of the thread's (its commit shared with the writes handed to
   * the thread with it; see GroupCommit). Its promise settles only after the commit;
   * `committed` is given its value first, in commit order (write()'s after-commit callbacks).
   */
  writeOnThread<I, O>(
    program: WriterProgram<I, O>,
    input: I,
    committed: (value: O) => void,
  ): Promise<O> {
    if (!this.writesOnThread) return Promise.reject(new Error('there is no writer thread'));
    return this.reported(false, () => this.group.writeOnThread<O>({ program, input }, committed));
  }

  /**
   * A write that decides on `environment`'s row (a decision): as write(). On PostgreSQL, at
   * most PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT of one environment's are in the database at
   * once from this instance; the others wait here, in arrival order, holding no connection.
   * The database still decides each one (the row's lock orders them, the conditions decide):
   * this only spares PostgreSQL a crowd of transactions waiting on one row, each holding a
   * backend and costing it CPU when the lock passes (more than the decisions themselves, at
   * ten waiting).
   */
  writeFor<T>(
    environment: string,
    work: (manager: Transaction) => Promise<T>,
    token?: TokenCheck,
  ): Promise<T> {
    const lines = this.decisionsByEnvironment;
    return lines ? lines.run(environment, () => this.write(work, token)) : this.write(work, token);
  }

  /**
   * writeFor() for a decision whose transaction waits for no answer before its COMMIT (a
   * submit at once). On PostgreSQL, those of one environment that arrive while its turns are
   * held are gathered, and share one transaction when the next turn comes: one BEGIN, each
   * one's token check and statements in arrival order, one COMMIT, sent together; none is
   * answered before that COMMIT. The database decides each as it would alone, the ones
   * before it committed: the row's lock is taken once, and PostgreSQL commits (and sends the
   * notifications of) all of them at once. If that transaction fails, nothing of it
   * committed, and each decision is then made again in a transaction of its own, in the
   * same order, as writeFor() makes it: whatever failed is its own decision's failure.
   * On SQLite: writeFor() (its writes share commits already).
   */
  writeGatheredFor<T>(
    environment: string,
    work: (manager: Transaction) => Promise<T>,
    token?: TokenCheck,
  ): Promise<T> {
    const lines = this.decisionsByEnvironment;
    if (!lines) return this.write(work, token);
    return new Promise<T>((resolve, reject) => {
      const decision: Gathered = {
        work,
        token,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      const gathered = this.gathering.get(environment);
      if (gathered && gathered.length < TOGETHER_LIMIT) {
        gathered.push(decision);
        this.joinedWaiting++;
        return;
      }
      const together = [decision];
      this.gathering.set(environment, together);
      void lines.run(environment, () => {
        // Its turn came: later decisions gather for the next one.
        if (this.gathering.get(environment) === together) this.gathering.delete(environment);
        this.joinedWaiting -= together.length - 1;
        return this.commitTogether(together);
      });
    });
  }

  /** Decisions waiting for their environment's turn to reach the database (PostgreSQL). */
  get decisionsWaiting(): number {
    // A gathered group waits in line as one.
    return (this.decisionsByEnvironment?.queued ?? 0) + this.joinedWaiting;
  }

  /** Decisions at once in one transaction; never rejects (each decision is answered). */
  private async commitTogether(together: Gathered[]): Promise<void> {
    if (together.length > 1) {
      let values: unknown[] | null = null;
      const callbacks: (() => void)[] = [];
      try {
        this.storage.assertWritable();
        values = await this.pipelined(together, callbacks);
      } catch (error) {
        this.logger.debug(
          `${together.length} decisions in one transaction failed (${(error as Error).message}); each is made alone`,
        );
      }
      if (values) {
        this.storage.committed();
        for (const callback of callbacks) callback();
        together.forEach(({ resolve }, i) => resolve(values[i]));
        return;
      }
    }
    for (const { work, token, resolve, reject } of together)
      await this.write(work, token).then(resolve, reject);
  }

  /** A write; a client's (not the probe's) outcome is what /health reports (StorageMonitor). */
  private run<T>(
    probe: boolean,
    work: (manager: Transaction) => Promise<T>,
    token?: TokenCheck,
  ): Promise<T> {
    return this.reported(probe, () =>
      this.serialized ? this.group.write(work) : this.transaction(work, token),
    );
  }

  /**
   * A write's outcome told to the StorageMonitor: refused at once while storage is known to
   * take no writes; a client's (not the probe's) commit or storage failure is what /health
   * reports.
   */
  private async reported<T>(probe: boolean, write: () => Promise<T>): Promise<T> {
    this.storage.assertWritable();
    let result: T;
    try {
      result = await write();
    } catch (error) {
      // Disk full, read-only, file lost: STORAGE_UNAVAILABLE instead of INTERNAL.
      throw this.storage.failed(error, probe);
    }
    if (!probe) this.storage.committed();
    return result;
  }

  private async transaction<T>(
    work: (manager: Transaction) => Promise<T>,
    token: TokenCheck | undefined,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const callbacks: (() => void)[] = [];
        const [result] = await this.pipelined([{ work, token }], callbacks);
        for (const callback of callbacks) callback();
        return result as T;
      } catch (error) {
        if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        this.logger.debug(`transaction conflict, attempt ${attempt}: ${(error as Error).message}`);
        // Back off a little, with jitter, so that conflicting writers do not meet again at once.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
      }
    }
  }

  /**
   * PostgreSQL: one transaction on one pooled connection, whose statements are pipelined
   * where nothing waits for their answers: BEGIN travels with the first statement, and the
   * later statements (executeLater: the rows a decision adds, its notifications) with the
   * COMMIT; a token check is the first of the later statements, so it travels with BEGIN and
   * the first statement waited for. The commit is reported only when every statement of the transaction was
   * answered without error; otherwise the transaction is rolled back and the first error of
   * a later statement (the cause of any that followed it) is thrown. Several writes
   * (writeGatheredFor) run one after the other in the one transaction; their values, in order.
   * The commit is counted here; the caller runs `callbacks` once it has its values.
   */
  private async pipelined(
    writes: { work: (manager: Transaction) => Promise<unknown>; token?: TokenCheck }[],
    callbacks: (() => void)[],
  ): Promise<unknown[]> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    const manager = new Transaction(this.dataSource, runner);
    const { notifications } = manager;
    try {
      inOneWrite(runner);
      const begun = runner.query('BEGIN');
      begun.catch(() => undefined);
      openLater(manager, begun);
      const values: unknown[] = [];
      try {
        for (const { work, token } of writes) {
          if (token)
            await executeLater(
              manager,
              'SELECT planfence_check_token(CAST(:name AS text), CAST(:tokenHash AS text))',
              { name: token.name, tokenHash: token.tokenHash },
            );
          values.push(await work(manager));
        }
        // One statement for all of them, in the order they were made: PostgreSQL delivers
        // a transaction's notifications in that order, at its commit.
        if (notifications.length)
          await executeLater(
            manager,
            'SELECT pg_notify(n->>0, n->>1) FROM json_array_elements(CAST(:batch AS json)) AS n',
            { batch: JSON.stringify(notifications) },
          );
      } catch (error) {
        throw (await firstFailure(takeLater(manager, false))) ?? (error as Error);
      }
      inOneWrite(runner);
      const pending = takeLater(manager, true);
      const committed = runner.query('COMMIT');
      committed.catch(() => undefined);
      // After an error PostgreSQL answers COMMIT with a rollback, not an error.
      const failure = await firstFailure(pending);
      if (failure) throw failure;
      await committed;
      this.commits.transactions++;
      this.commits.writes += writes.length;
      callbacks.push(...manager.onCommit);
      return values;
    } catch (error) {
      await runner.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /** Runs `callback` after the transaction of `manager` commits; never if it rolls back. */
  afterCommit(manager: Transaction, callback: () => void): void {
    manager.onCommit.push(callback);
  }

  /**
   * PostgreSQL: `pg_notify(channel, payload)` in the transaction of `manager`: every
   * listening instance hears it once the transaction commits, never if it rolls back. A
   * transaction's notifications are sent in one statement just before its COMMIT.
   */
  notify(manager: Transaction, channel: string, payload: string): void {
    if (this.serialized) throw new Error('notify() is for PostgreSQL transactions');
    manager.notifications.push([channel, payload]);
  }

  /** Reads committed state only. */
  read<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    // SQLite: a read touches the mapped -shm file as a write does (StorageMonitor).
    this.storage.shmUnwritable();
    return this.exclusive(() => work(this.dataSource.manager));
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (!this.serialized) return work();
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/** At most this many decisions at once share one transaction (bounds what one failure makes again). */
const TOGETHER_LIMIT = 64;

/** A decision at once waiting, gathered, for its environment's next transaction (writeGatheredFor). */
interface Gathered {
  work: (manager: Transaction) => Promise<unknown>;
  token: TokenCheck | undefined;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * PostgreSQL: the statements a transaction sends together now (BEGIN with the statements
 * before the first answer it waits for; the held-back rows with COMMIT) leave in one socket
 * write instead of one each: the connection's socket is corked until the microtasks queued
 * now have run. On this kind of machine a write to a socket is the costliest call a
 * statement makes.
 */
function inOneWrite(runner: QueryRunner): void {
  const socket = (runner as { databaseConnection?: { connection?: { stream?: Socket } } })
    .databaseConnection?.connection?.stream;
  if (typeof socket?.cork !== 'function') return;
  socket.cork();
  // A tick queued from a microtask runs once the microtask queue is empty.
  process.nextTick(() => socket.uncork());
}

/** The first of these answers that failed, once all have come. */
async function firstFailure(answers: Promise<unknown>[]): Promise<Error | undefined> {
  const settled = await Promise.allSettled(answers);
  const failed = settled.find((answer) => answer.status === 'rejected');
  return failed?.reason as Error | undefined;
}
