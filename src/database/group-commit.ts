import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { isConflict, MAX_ATTEMPTS } from './conflicts.js';
import { sqliteStatement } from './sql.js';
import type { SqliteWriter, ThreadWrite } from './sqlite-writer.js';
import { StorageError, type StorageMonitor } from './storage.js';
import { Transaction } from './transaction.js';

/** At most this many writes share one commit (bounds the wait of the first of them). */
const GROUP_LIMIT = 256;

/**
 * Groups handed to the writer thread at once: the next is ready in the thread when the
 * last commits, instead of waiting for the request thread to hear of that commit and send it.
 */
const THREAD_GROUPS_IN_FLIGHT = 2;

interface WaitingWrite {
  /** A write of the request thread's connection, or (`thread`) of the writer thread's. */
  work: ((manager: Transaction) => Promise<unknown>) | null;
  thread?: ThreadWrite & { committed: (value: unknown) => void };
  /** performance.now() when it was queued. */
  queuedAt: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * SQLite's group commit: the writes that arrive together are committed together, in one
 * transaction with one savepoint per write, so each write's statements see the writes
 * before it and a write that throws rolls back to its own savepoint only; one COMMIT (one
 * fsync at synchronous=FULL) then makes all of them durable at once, and only then is any
 * of them answered. If the transaction as a whole fails, every write in it fails.
 *
 * With a writer thread (SqliteWriter), the writes handed to it (writeOnThread) form groups
 * of their own, committed by the thread in the same way while the request thread serves
 * requests. A group is of one kind: the kind of the write that waited longest, and every
 * write of that kind waiting (takeNext); when each kind may run is startGroup's.
 */
export class GroupCommit {
  private readonly logger = new Logger('Database');
  /** Writes waiting for the next group commit, and whether one is scheduled. */
  private readonly waiting: WaitingWrite[] = [];
  private groupScheduled = false;
  /** Groups handed to the writer thread and not yet answered. */
  private threadGroups = 0;
  /** Whether a group of the request thread's connection is running. */
  private requestThreadGroup = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: StorageMonitor,
    /**
     * Transactions committed, the writes they carried, and the milliseconds writes waited in
     * the queue for their group to begin (over a run's milliseconds: the queue's mean depth).
     */
    private readonly commits: {
      transactions: number;
      writes: number;
      onThread: number;
      queuedMs: number;
    },
    /** Runs work alone on the one connection. */
    private readonly exclusive: (work: () => Promise<void>) => Promise<void>,
    private readonly writer: SqliteWriter | null,
  ) {}

  write<T>(work: (manager: Transaction) => Promise<T>): Promise<T> {
    return this.enqueue<T>(work);
  }

  /**
   * A write the writer thread runs (its program and input), answered once its group
   * committed; `committed` is given its value first, in commit order, as a write's
   * after-commit callbacks are.
   */
  writeOnThread<T>(write: ThreadWrite, committed: (value: T) => void): Promise<T> {
    return this.enqueue<T>(null, {
      ...write,
      committed: committed as (value: unknown) => void,
    });
  }

  private enqueue<T>(work: WaitingWrite['work'], thread?: WaitingWrite['thread']): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({
        work,
        thread,
        queuedAt: performance.now(),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.scheduleGroup();
    });
  }

  private scheduleGroup(): void {
    if (this.groupScheduled) return;
    this.groupScheduled = true;
    // After the requests that are ready now have had their turn to join the group.
    setImmediate(() => this.startGroup());
  }

  /**
   * Starts the next group, of the kind of the write that waited longest, when it may run:
   * a group of the request thread's connection runs alone (no other group of either kind
   * at once, and in line with that connection's reads); the writer thread's groups run
   * while no group of the request thread's does, at most THREAD_GROUPS_IN_FLIGHT handed
   * to the thread at once (it commits one after another, the next ready when the last ends).
   */
  private startGroup(): void {
    this.groupScheduled = false;
    const head = this.waiting[0];
    if (!head || this.requestThreadGroup) return;
    if (head.thread) {
      if (this.threadGroups >= THREAD_GROUPS_IN_FLIGHT) return;
      this.threadGroups++;
      this.commitOnThread()
        .catch((error: unknown) => this.logger.error(`group commit failed: ${String(error)}`))
        .finally(() => {
          this.threadGroups--;
          this.scheduleGroup();
        });
      return;
    }
    if (this.threadGroups > 0) return;
    this.requestThreadGroup = true;
    this.exclusive(() => this.commitNextGroup())
      .catch((error: unknown) => this.logger.error(`group commit failed: ${String(error)}`))
      .finally(() => {
        this.requestThreadGroup = false;
        // Writes beyond the group's limit, or left waiting by a failed group.
        if (this.waiting.length) this.scheduleGroup();
      });
  }

  private async commitNextGroup(): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    const group: { write: WaitingWrite; outcome: { result: unknown } | { error: unknown } }[] = [];
    const callbacks = new Map<WaitingWrite, (() => void)[]>();
    let current: WaitingWrite | undefined;
    try {
      await runner.startTransaction();
      while (group.length < GROUP_LIMIT) {
        current = this.takeNext(false);
        if (!current) break;
        this.commits.queuedMs += performance.now() - current.queuedAt;
        for (let attempt = 1; ; attempt++) {
          // Each write, and each attempt of it, is a transaction of its own: its savepoint.
          const manager = new Transaction(this.dataSource, runner);
          sqliteStatement(manager, 'SAVEPOINT write')!.run();
          try {
            const result = await current.work!(manager);
            sqliteStatement(manager, 'RELEASE write')!.run();
            callbacks.set(current, manager.onCommit);
            group.push({ write: current, outcome: { result } });
            break;
          } catch (error) {
            try {
              sqliteStatement(manager, 'ROLLBACK TO write')!.run();
              sqliteStatement(manager, 'RELEASE write')!.run();
            } catch {
              // SQLite ended the whole transaction (as it may on a full disk): the write's own error says why.
              throw error;
            }
            if (isConflict(error) && attempt < MAX_ATTEMPTS) continue;
            group.push({ write: current, outcome: { error } });
            break;
          }
        }
        current = undefined;
      }
      await runner.commitTransaction();
    } catch (error) {
      await runner.rollbackTransaction().catch(() => {
        // SQLite already ended the transaction (as it does on I/O errors): reset TypeORM's view of it.
        Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
      });
      this.logger.error(
        `group of ${group.length + (current ? 1 : 0)} writes rolled back: ${(error as Error).message}`,
      );
      for (const { write } of group) write.reject(error);
      current?.reject(error);
      return;
    }
    if (this.lostCommit(group.map(({ write }) => write))) return;
    this.commits.transactions++;
    this.commits.writes += group.filter(({ outcome }) => 'result' in outcome).length;
    // In commit order, before the next transaction starts.
    for (const { write, outcome } of group) {
      if ('error' in outcome) {
        write.reject(outcome.error);
        continue;
      }
      for (const callback of callbacks.get(write) ?? []) {
        try {
          callback();
        } catch (error) {
          this.logger.error(`after-commit callback failed: ${(error as Error).message}`);
        }
      }
      write.resolve(outcome.result);
    }
  }

  /** The writes waiting for the writer thread (GROUP_LIMIT at most), as one group of its. */
  private async commitOnThread(): Promise<void> {
    const group: WaitingWrite[] = [];
    while (group.length < GROUP_LIMIT) {
      const write = this.takeNext(true);
      if (!write) break;
      this.commits.queuedMs += performance.now() - write.queuedAt;
      group.push(write);
    }
    let outcomes;
    try {
      outcomes = await this.writer!.commit(group.map(({ thread }) => thread!));
    } catch (error) {
      this.logger.error(
        `group of ${group.length} writes rolled back on the writer thread: ${(error as Error).message}`,
      );
      for (const write of group) write.reject(error);
      return;
    }
    if (this.lostCommit(group)) return;
    this.commits.transactions++;
    group.forEach((write, i) => {
      const outcome = outcomes[i];
      if ('error' in outcome) return write.reject(outcome.error);
      this.commits.writes++;
      this.commits.onThread++;
      try {
        write.thread!.committed(outcome.value);
      } catch (error) {
        this.logger.error(`after-commit callback failed: ${(error as Error).message}`);
      }
      write.resolve(outcome.value);
    });
  }

  /**
   * The first waiting write of one kind (the writer thread's, or the request thread's),
   * taken out of the line. A group takes every write of its kind that waits, whatever
   * waits between them: writes that wait together are concurrent (none was answered), so
   * that their order of arrival across the two kinds decides nothing, and groups stay large.
   */
  private takeNext(onThread: boolean): WaitingWrite | undefined {
    const at = this.waiting.findIndex((write) => (write.thread !== undefined) === onThread);
    return at < 0 ? undefined : this.waiting.splice(at, 1)[0];
  }

  /**
   * Whether the group just committed went to a file that was deleted or replaced meanwhile:
   * then it is not durable, and none of its writes is acknowledged.
   */
  private lostCommit(group: WaitingWrite[]): boolean {
    const lost = this.storage.lost();
    if (!lost) return false;
    for (const write of group) write.reject(new StorageError(lost));
    return true;
  }
}
