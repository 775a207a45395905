import { randomUUID } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { Logger } from '@nestjs/common';
import Sqlite from 'better-sqlite3';

type SqliteConnection = Sqlite.Database;

const logger = new Logger('Storage');

/** The files that make up one SQLite database of the service. */
export interface SqliteFiles {
  database: string;
  wal: string;
  shm: string;
  journal: string;
  /** Held (an OS lock taken through SQLite) by the one process that uses the database. */
  lock: string;
  /** The id of the database created in this folder, also stored inside the database. */
  marker: string;
}

export function sqliteFiles(database: string): SqliteFiles {
  return {
    database,
    wal: `${database}-wal`,
    shm: `${database}-shm`,
    journal: `${database}-journal`,
    lock: `${database}.lock`,
    marker: `${database}.id`,
  };
}

/** The service cannot start on this storage; the message tells the operator what to do. */
export class StorageStartError extends Error {
  constructor(
    message: string,
    /** The process's exit code for it (docs/operations.md, "Exit codes of the service"). */
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'StorageStartError';
  }
}

/**
 * Exit code of a service that stopped (or would not start) because SQLite's shared-memory
 * file (`-shm`) cannot be written: SQLite maps that file into memory, and the first access
 * to a mapped page the kernel refuses kills the process with SIGBUS (exit 135), which no
 * JavaScript handler can catch. The service checks the file before it opens the database,
 * before a turn's first read or write, after every commit and every SHM_CHECK_MS, and stops with this code
 * and a message instead.
 */
export const EXIT_STORAGE_UNSAFE = 74;

/** How often an open database's -shm file is checked for writability. */
export const SHM_CHECK_MS = 100;

/**
 * Why SQLite's -shm file of `files` cannot be written (an immutable attribute, a read-only
 * mode for a user other than root, a read-only mount), or null when it can or does not exist.
 * Null too while the database file itself is read-only: SQLite then works read-only and maps
 * the -shm file read-only (it writes nothing there); writes fail with STORAGE_UNAVAILABLE.
 */
export function unwritableShm(files: SqliteFiles): string | null {
  try {
    accessSync(files.database, constants.W_OK);
  } catch {
    return null;
  }
  try {
    accessSync(files.shm, constants.W_OK);
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    if (code === 'ENOENT') return null;
    return (
      `${files.shm} cannot be written (${code}); SQLite maps it into memory and a write ` +
      `to it would kill the process (SIGBUS). Make it writable again (chattr -i, chmod u+w, ` +
      `a writable mount), then restart`
    );
  }
}

let unsafeHandler: ((reason: string) => void) | null = null;
let unsafeReported = false;

/**
 * Who hears that the -shm file became unwritable: the service's entry point logs the reason
 * and exits with EXIT_STORAGE_UNSAFE before any access to the mapping. Without a handler (the
 * service in a test process) the reason is logged once and writes are refused
 * (StorageMonitor).
 */
export function onStorageUnsafe(handler: (reason: string) => void): void {
  unsafeHandler = handler;
}

/** Reports an unwritable -shm file (once per process). */
export function reportStorageUnsafe(reason: string): void {
  if (unsafeReported) return;
  unsafeReported = true;
  logger.error(`stopping: ${reason}`);
  unsafeHandler?.(reason);
}

export interface SqliteGuardOptions {
  /** Create a new empty database even where signs show one existed (PLANFENCE_INIT_DATABASE). */
  initialize: boolean;
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Creates `path` readable and writable by its owner only, unless it exists. */
export function createPrivateFile(path: string): void {
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/** Takes the group and other bits away (never adds any: a read-only file stays read-only). */
export function restrictMode(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    return;
  }
  if ((mode & 0o077) === 0) return;
  try {
    chmodSync(path, mode & 0o700);
  } catch (error) {
    logger.warn(`cannot restrict ${path} to its owner: ${(error as Error).message}`);
  }
}

interface Holder {
  pid: number;
  host: string;
  startedAt: string;
  token: string;
}

/** True when the holder ran on this host and its process is gone. */
function gone(holder: Holder): boolean {
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * One process per SQLite file. The lock is SQLite's own write lock on a small database
 * next to the service's (`planfence.db.lock`), held in an open transaction for the life of
 * the process: the operating system releases it however the process ends (kill -9
 * included), so a lock is never stale. The holder's pid, host and start time are
 * committed in that file before the lock is taken for good, so that a second process
 * can name the holder. A holder of record that does not hold the lock (it died, or is
 * between recording itself and taking the lock) is given one short wait, then replaced.
 */
export class ProcessLock {
  private constructor(
    private readonly connection: SqliteConnection,
    readonly path: string,
  ) {}

  static acquire(path: string, database: string): ProcessLock {
    try {
      return ProcessLock.take(path, database);
    } catch (error) {
      if (error instanceof StorageStartError) throw error;
      throw new StorageStartError(
        `cannot take the lock ${path} for ${database}: ${(error as Error).message}`,
      );
    }
  }

  private static take(path: string, database: string): ProcessLock {
    createPrivateFile(path);
    restrictMode(path);
    const connection = new Sqlite(path, { timeout: 0 });
    const me: Holder = {
      pid: process.pid,
      host: hostname(),
      startedAt: new Date().toISOString(),
      token: randomUUID(),
    };
    const waitedFor = new Set<string>();
    try {
      for (let attempt = 0; attempt < 400; attempt++) {
        if (!tryBegin(connection)) {
          const holder = readHolder(connection);
          if (holder && holder.token !== me.token) {
            throw new StorageStartError(
              `the database ${database} is in use by process ${holder.pid} on ${holder.host} ` +
                `(started ${holder.startedAt}); only one process may use a SQLite file ` +
                `(lock: ${path}). Stop that process, or use PostgreSQL for several instances.`,
            );
          }
          sleep(5 + Math.random() * 20);
          continue;
        }
        connection.exec(
          'CREATE TABLE IF NOT EXISTS holder (one INTEGER PRIMARY KEY CHECK (one = 1), ' +
            'pid INTEGER NOT NULL, host TEXT NOT NULL, started_at TEXT NOT NULL, token TEXT NOT NULL)',
        );
        const holder = readHolder(connection);
        if (holder?.token === me.token) return new ProcessLock(connection, path);
        if (holder && !gone(holder) && !waitedFor.has(holder.token)) {
          connection.exec('ROLLBACK');
          waitedFor.add(holder.token);
          sleep(100 + Math.random() * 50);
          continue;
        }
        connection
          .prepare(
            'INSERT OR REPLACE INTO holder (one, pid, host, started_at, token) VALUES (1, ?, ?, ?, ?)',
          )
          .run(me.pid, me.host, me.startedAt, me.token);
        connection.exec('COMMIT');
        // Take the lock again and check that no other process recorded itself in between.
      }
      throw new StorageStartError(`could not take the lock ${path} for ${database}`);
    } catch (error) {
      connection.close();
      throw error;
    }
  }

  /** Ends the transaction that holds the lock (closing the connection rolls it back). */
  release(): void {
    if (this.connection.open) this.connection.close();
  }
}

function tryBegin(connection: SqliteConnection): boolean {
  try {
    connection.exec('BEGIN IMMEDIATE');
    return true;
  } catch (error) {
    if (isBusy(error)) return false;
    throw error;
  }
}

function readHolder(connection: SqliteConnection): Holder | null {
  try {
    const row = connection
      .prepare('SELECT pid, host, started_at AS startedAt, token FROM holder WHERE one = 1')
      .get() as Holder | undefined;
    return row ?? null;
  } catch (error) {
    // No holder table yet, or the holder is committing this very moment.
    if (isBusy(error) || /no such table/.test((error as Error).message)) return null;
    throw error;
  }
}

/**
 * The checks before the service's SQLite file is opened: the process lock, a missing
 * database where one existed, file modes. Returns the lock, to release when the database
 * closes.
 */
export function guardSqliteFiles(files: SqliteFiles, options: SqliteGuardOptions): ProcessLock {
  mkdirSync(dirname(files.database), { recursive: true });
  const lock = ProcessLock.acquire(files.lock, files.database);
  try {
    if (!existsSync(files.database)) {
      const signs = [files.marker, files.wal, files.shm, files.journal].filter((f) =>
        existsSync(f),
      );
      if (signs.length && !options.initialize) {
        throw new StorageStartError(
          `the database ${files.database} is missing, but this folder held one ` +
            `(${signs.join(', ')}); refusing to create an empty database, which would issue ` +
            `generations again. Restore it from a backup (see docs/operations.md, ` +
            `"Backup and restore"), or set PLANFENCE_INIT_DATABASE=1 for one start to create a new one.`,
        );
      }
      for (const sign of signs) {
        if (sign === files.marker) {
          rmSync(sign, { force: true });
          continue;
        }
        // The remnants of the lost database must not be replayed into the new one.
        const aside = `${sign}.orphaned-${Date.now()}`;
        renameSync(sign, aside);
        logger.warn(`moved ${sign} of the missing database aside to ${aside}`);
      }
      if (signs.length) logger.warn(`creating a new empty database ${files.database}`);
    }
    const notSqlite = notASqliteDatabase(files.database);
    if (notSqlite) throw new StorageStartError(notSqlite);
    // SQLite gives its -wal, -shm and -journal files the mode of the database file.
    createPrivateFile(files.database);
    for (const file of [files.database, files.wal, files.shm, files.journal, files.marker])
      restrictMode(file);
    const shm = unwritableShm(files);
    if (shm) throw new StorageStartError(shm, EXIT_STORAGE_UNSAFE);
    return lock;
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** What every SQLite database file begins with. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Why `path` cannot be the service's database: a file that is not empty and does not begin
 * with SQLite's header (DATABASE_URL names another kind of file); null for a SQLite file, an
 * empty one or none (which SQLite makes a new database).
 */
function notASqliteDatabase(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const start = Buffer.alloc(SQLITE_HEADER.length);
    const read = readSync(fd, start, 0, start.length, 0);
    if (read === 0 || start.equals(SQLITE_HEADER)) return null;
    return (
      `${path} is not a SQLite database (it does not begin with SQLite's header): ` +
      'DATABASE_URL must name a planfence database, or a path where no file exists yet'
    );
  } finally {
    closeSync(fd);
  }
}

/**
 * Compares the database's id with the folder's marker file: writes the marker when it is
 * missing; refuses a database that is not the one this folder held, unless `initialize`.
 */
export function checkMarker(files: SqliteFiles, id: string, options: SqliteGuardOptions): void {
  let recorded: string | null = null;
  try {
    recorded = readFileSync(files.marker, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (recorded === id) return;
  if (recorded === null) {
    writeFileSync(files.marker, `${id}\n`, { flag: 'wx', mode: 0o600 });
    return;
  }
  if (!options.initialize) {
    throw new StorageStartError(
      `the database ${files.database} (id ${id}) is not the database this folder held ` +
        `(id ${recorded} in ${files.marker}); refusing to serve it. If it is meant to ` +
        `replace that one, set PLANFENCE_INIT_DATABASE=1 for one start.`,
    );
  }
  const next = `${files.marker}.${process.pid}.tmp`;
  writeFileSync(next, `${id}\n`, { flag: 'w', mode: 0o600 });
  renameSync(next, files.marker);
  logger.warn(`${files.marker} now names the database ${id} (was ${recorded})`);
}

/** Device and inode of a file, or null when it does not exist. */
export function identityOf(path: string): string | null {
  try {
    const stat = statSync(path);
    return `${stat.dev}:${stat.ino}`;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** Locks taken by `guardBeforeLoading`, by absolute path, until the driver opens the file. */
const takenEarly = new Map<string, ProcessLock>();

/**
 * Runs the guard of `path` (the lock, a missing database where one existed, file modes)
 * before the application's modules are loaded, so that a start that cannot have the file
 * is refused at once rather than after seconds of loading. The lock is handed to the
 * driver that opens the file (`guardedSqliteDriver`). Throws StorageStartError.
 */
export function guardBeforeLoading(path: string, options: SqliteGuardOptions): void {
  const key = resolve(path);
  if (takenEarly.has(key)) return;
  takenEarly.set(key, guardSqliteFiles(sqliteFiles(path), options));
}

/**
 * A better-sqlite3 constructor for TypeORM's `driver` option: runs the guard before the
 * file is opened (or takes over the lock `guardBeforeLoading` took), and releases the lock
 * when the connection closes.
 */
export function guardedSqliteDriver(options: SqliteGuardOptions): unknown {
  return function GuardedSqlite(path: string, driverOptions: Sqlite.Options): SqliteConnection {
    const key = resolve(path);
    const early = takenEarly.get(key);
    takenEarly.delete(key);
    const lock = early ?? guardSqliteFiles(sqliteFiles(path), options);
    let connection: SqliteConnection;
    try {
      connection = new Sqlite(path, driverOptions);
    } catch (error) {
      lock.release();
      throw error;
    }
    // The -shm file is mapped once the database is used: one that turns unwritable is
    // reported before the next access to the mapping can kill the process.
    const files = sqliteFiles(path);
    const watch = setInterval(() => {
      const reason = unwritableShm(files);
      if (reason) reportStorageUnsafe(reason);
    }, SHM_CHECK_MS);
    watch.unref();
    const close = connection.close.bind(connection);
    connection.close = () => {
      clearInterval(watch);
      try {
        return close();
      } finally {
        lock.release();
      }
    };
    return connection;
  };
}
