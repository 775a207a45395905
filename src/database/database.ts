import {
  Inject,
  Injectable,
  Logger,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { DataSource, type EntityManager, QueryFailedError } from 'typeorm';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { checkMarker, sqliteFiles } from './sqlite-files.js';
import { StorageError, StorageMonitor } from './storage.js';

/** Thrown inside a write transaction to roll it back and run it again (a lost race, not a client error). */
export class RetryTransaction extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'RetryTransaction';
  }
}

const MAX_ATTEMPTS = 8;

/** At most this many writes share one commit (bounds the wait of the first of them). */
const GROUP_LIMIT = 256;

interface WaitingWrite {
  work: (manager: EntityManager) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Key of the PostgreSQL advisory lock that instances starting together take around migrations. */
const MIGRATION_LOCK = 4_711_2026;

/** Unique violations, serialization failures and deadlocks: the transaction lost a race and can run again. */
function isConflict(error: unknown): boolean {
  if (error instanceof RetryTransaction) return true;
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = (error as QueryFailedError & { driverError?: { code?: string } }).driverError;
  const code = driverError?.code ?? '';
  return [
    '23505',
    '40001',
    '40P01',
    'SQLITE_CONSTRAINT_PRIMARYKEY',
    'SQLITE_CONSTRAINT_UNIQUE',
  ].includes(code);
}

/**
 * The one way the service reaches its database.
 *
 * On SQLite every transaction and every read runs alone, one after the other, on the
 * driver's single connection: TypeORM shares that connection, so concurrent transactions
 * would nest or lose updates, and a read in between would see uncommitted rows.
 * On PostgreSQL each transaction has its own pooled connection and row locks order writers.
 */
@Injectable()
export class Database implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(Database.name);
  private readonly serialized: boolean;
  private tail: Promise<unknown> = Promise.resolve();
  /** SQLite: writes waiting for the next group commit, and whether one is scheduled. */
  private readonly waiting: WaitingWrite[] = [];
  private groupScheduled = false;
  /** Transactions committed, and the writes they carried (more than one per commit with group commit). */
  readonly commits = { transactions: 0, writes: 0 };
  /** Callbacks to run once the transaction of a manager has committed. */
  private readonly committed = new WeakMap<EntityManager, (() => void)[]>();

  /** Whether writes can succeed (see StorageMonitor); /health reports it. */
  readonly storage: StorageMonitor;
  private storageTimer: NodeJS.Timeout | undefined;
  private probing: Promise<void> | null = null;

  constructor(
    readonly dataSource: DataSource,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.serialized = dataSource.options.type === 'better-sqlite3';
    const db = config.database;
    this.storage = new StorageMonitor(
      db.kind === 'sqlite' && db.path !== ':memory:' ? sqliteFiles(db.path) : null,
      config.storage.writeFailureMs,
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
    await this.migrate();
    try {
      await this.checkIdentity();
    } catch (error) {
      await this.dataSource.destroy().catch(() => undefined);
      throw error;
    }
    this.storage.recordOpenedFiles();
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

  onModuleDestroy(): void {
    clearInterval(this.storageTimer);
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

  private async migrate(): Promise<void> {
    if (this.serialized) {
      await this.dataSource.runMigrations({ transaction: 'each' });
      return;
    }
    const session = this.dataSource.createQueryRunner();
    await session.connect();
    try {
      await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const applied = await this.dataSource.runMigrations({ transaction: 'each' });
      if (applied.length)
        this.logger.log(`applied migrations: ${applied.map((m) => m.name).join(', ')}`);
    } finally {
      await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await session.release();
    }
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
   */
  write<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.run(false, work);
  }

  /** A write; a client's (not the probe's) outcome is what /health reports (StorageMonitor). */
  private async run<T>(probe: boolean, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    this.storage.assertWritable();
    let result: T;
    try {
      result = await (this.serialized ? this.grouped(work) : this.transaction(work));
    } catch (error) {
      // Disk full, read-only, file lost: STORAGE_UNAVAILABLE instead of INTERNAL.
      throw this.storage.failed(error, probe);
    }
    if (!probe) this.storage.committed();
    return result;
  }

  private async transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const callbacks: (() => void)[] = [];
        const result = await this.dataSource.transaction((manager) => {
          this.committed.set(manager, callbacks);
          return work(manager);
        });
        this.commits.transactions++;
        this.commits.writes++;
        for (const callback of callbacks) callback();
        return result;
      } catch (error) {
        if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        this.logger.debug(`transaction conflict, attempt ${attempt}: ${(error as Error).message}`);
        // Back off a little, with jitter, so that conflicting writers do not meet again at once.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
      }
    }
  }

  private grouped<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ work, resolve: resolve as (value: unknown) => void, reject });
      this.scheduleGroup();
    });
  }

  private scheduleGroup(): void {
    if (this.groupScheduled) return;
    this.groupScheduled = true;
    // After the requests that are ready now have had their turn to join the group.
    setImmediate(() => void this.exclusive(() => this.commitGroup()));
  }

  private async commitGroup(): Promise<void> {
    this.groupScheduled = false;
    if (!this.waiting.length) return;
    try {
      await this.commitNextGroup();
    } finally {
      // Writes beyond the group's limit, or left waiting by a failed group.
      if (this.waiting.length) this.scheduleGroup();
    }
  }

  private async commitNextGroup(): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    const group: { write: WaitingWrite; outcome: { result: unknown } | { error: unknown } }[] = [];
    const callbacks = new Map<WaitingWrite, (() => void)[]>();
    let current: WaitingWrite | undefined;
    try {
      await runner.startTransaction();
      while (this.waiting.length && group.length < GROUP_LIMIT) {
        current = this.waiting.shift()!;
        for (let attempt = 1; ; attempt++) {
          const manager = this.dataSource.createEntityManager(runner);
          const own: (() => void)[] = [];
          this.committed.set(manager, own);
          sqliteStatement(manager, 'SAVEPOINT write')!.run();
          try {
            const result = await current.work(manager);
            sqliteStatement(manager, 'RELEASE write')!.run();
            callbacks.set(current, own);
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
    // Committed to a file that was deleted or replaced meanwhile: not durable, not acknowledged.
    const lost = this.storage.lost();
    if (lost) {
      for (const { write } of group) write.reject(new StorageError(lost));
      return;
    }
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

  /** Runs `callback` after the transaction of `manager` commits; never if it rolls back. */
  afterCommit(manager: EntityManager, callback: () => void): void {
    const callbacks = this.committed.get(manager);
    if (!callbacks) throw new Error('afterCommit() needs a manager of Database.write()');
    callbacks.push(callback);
  }

  /** Reads committed state only. */
  read<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.exclusive(() => work(this.dataSource.manager));
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (!this.serialized) return work();
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/** A statement's text with positional placeholders, and the parameter name of each position. */
interface Bound {
  text: string;
  names: string[];
}

const boundStatements = { sqlite: new Map<string, Bound>(), postgres: new Map<string, Bound>() };

/**
 * Turns named `:parameters` into the driver's placeholders, once per statement text, and
 * binds every value (numbers too, which TypeORM's own escaping would write into the text
 * and so make a new statement to prepare for every timestamp).
 */
function bind(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): [string, unknown[]] {
  const postgres = manager.connection.options.type === 'postgres';
  const cache = postgres ? boundStatements.postgres : boundStatements.sqlite;
  let bound = cache.get(sql);
  if (!bound) {
    const names: string[] = [];
    const text = sql.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
      if (!postgres) {
        names.push(name);
        return '?';
      }
      // PostgreSQL numbers its placeholders: a name used twice is one parameter.
      const at = names.indexOf(name);
      return `$${at >= 0 ? at + 1 : names.push(name)}`;
    });
    bound = { text, names };
    cache.set(sql, bound);
  }
  const values = bound.names.map((name) => {
    const value = parameters[name];
    if (value === undefined) throw new Error(`statement parameter :${name} has no value`);
    return typeof value === 'boolean' && !postgres ? Number(value) : value;
  });
  return [bound.text, values];
}

type SqliteConnection = import('better-sqlite3').Database;
type SqliteStatement = import('better-sqlite3').Statement;

/** Prepared statements per SQLite connection, by text (a service has one connection; tests have many). */
const prepared = new WeakMap<SqliteConnection, Map<string, SqliteStatement>>();

/**
 * On SQLite, the statement prepared once on the driver's one connection, to run directly:
 * inside the transaction TypeORM began on that connection, without the query runner's
 * asynchronous layers around a synchronous driver. Null on PostgreSQL.
 */
function sqliteStatement(manager: EntityManager, text: string): SqliteStatement | null {
  if (manager.connection.options.type !== 'better-sqlite3') return null;
  const connection = (
    manager.connection.driver as unknown as { databaseConnection: SqliteConnection }
  ).databaseConnection;
  let statements = prepared.get(connection);
  if (!statements) prepared.set(connection, (statements = new Map<string, SqliteStatement>()));
  let statement = statements.get(text);
  if (!statement) statements.set(text, (statement = connection.prepare(text)));
  return statement;
}

function runSqlite<T>(query: string, values: unknown[], run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw new QueryFailedError(query, values, error as Error);
  }
}

/** Runs a conditional statement (named `:parameters`); the affected-row count is the decision. */
export async function execute(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<number> {
  if (!manager.queryRunner) throw new Error('execute() needs a transaction manager');
  const [query, values] = bind(manager, sql, parameters);
  const statement = sqliteStatement(manager, query);
  if (statement) return runSqlite(query, values, () => statement.run(...values).changes);
  const result = await manager.queryRunner.query(query, values, true);
  return result.affected ?? 0;
}

/** Runs a query (named `:parameters`) and returns its rows. */
export async function select<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<R[]> {
  const [query, values] = bind(manager, sql, parameters);
  const statement = sqliteStatement(manager, query);
  if (statement) return runSqlite(query, values, () => statement.all(...values) as R[]);
  return manager.query<R[]>(query, values);
}

/** Rows of an `UPDATE ... RETURNING`: PostgreSQL's driver answers it with [rows, affected]. */
export async function updateReturning<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): Promise<R[]> {
  const result = await select<unknown>(manager, sql, parameters);
  return (Array.isArray(result[0]) ? result[0] : result) as R[];
}

/**
 * The integers of the JSON array parameter `:name` as a subquery: one statement text
 * whatever the ids (statements are prepared and cached by their text).
 */
export function integerList(dialect: 'sqlite' | 'postgres', name: string): string {
  return dialect === 'postgres'
    ? `SELECT CAST(value AS INTEGER) FROM json_array_elements_text(CAST(:${name} AS json))`
    : `SELECT value FROM json_each(:${name})`;
}
