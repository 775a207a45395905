import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { Logger } from '@nestjs/common';
import { DomainError } from '../common/errors.js';
import {
  identityOf,
  reportStorageUnsafe,
  type SqliteFiles,
  unwritableShm,
} from './sqlite-files.js';

/**
 * The database cannot take writes: the disk is full, the file is read-only, or the SQLite
 * file was deleted or replaced under the running service. Nothing was written; the
 * message says why without SQL or paths.
 */
export class StorageError extends DomainError<'STORAGE_UNAVAILABLE'> {
  constructor(reason: string) {
    super('STORAGE_UNAVAILABLE', `storage unavailable: ${reason}; nothing was written`);
  }
}

/** SQLite result codes (extended ones share the prefix) and PostgreSQL SQLSTATEs that mean "writes cannot succeed". */
const SQLITE_FAILURES: [string, string][] = [
  ['SQLITE_FULL', 'the disk is full'],
  ['SQLITE_READONLY', 'the database is read-only'],
  ['SQLITE_IOERR', 'the database file cannot be written (I/O error)'],
  ['SQLITE_CANTOPEN', 'the database file cannot be opened'],
];
const POSTGRES_FAILURES: Record<string, string> = {
  '53100': 'the disk is full',
  '25006': 'the database is read-only',
  '58030': 'the database cannot be written (I/O error)',
};

/** Why `error` means that writes cannot succeed now, or null when it is some other error. */
export function storageFailureOf(error: unknown): string | null {
  if (!error || typeof error !== 'object') return null;
  const driver = (error as { driverError?: { code?: unknown } }).driverError;
  const raw = driver?.code ?? (error as { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : '';
  for (const [prefix, reason] of SQLITE_FAILURES) if (code.startsWith(prefix)) return reason;
  return POSTGRES_FAILURES[code] ?? null;
}

/**
 * What the service knows about its storage. `lost`: the SQLite file it writes to is no
 * longer the one in the folder (deleted or replaced): writes are refused until a restart,
 * since they would go to a file nobody will open again. `unwritable`: a write failed for a
 * storage reason (disk full, read-only); writes are still tried, and a probe write that
 * commits (Database.probeWrite: on /health and every check interval) clears it.
 */
export class StorageMonitor {
  private readonly logger = new Logger('Storage');
  private lostReason: string | null = null;
  private unwritableReason: string | null = null;
  /** Device:inode of the database and WAL files as opened. */
  private opened: { path: string; identity: string }[] = [];
  /** The last storage failure of a client's write (not the probe's), until one commits. */
  private clientFailure: { reason: string; at: number } | null = null;
  /** Whether the -shm file was checked in this turn of the event loop, and what was found. */
  private shmCheckedThisTurn = false;
  private shmFoundUnwritable = false;
  /**
   * Free bytes the SQLite file's file system must keep for the largest write a client may
   * make (PLANFENCE_STORAGE_MIN_FREE_BYTES; 0: not checked). Set by the health check.
   */
  minFreeBytes = 0;

  constructor(
    readonly files: SqliteFiles | null,
    /** How long a client's failed write keeps /health at 503 (PLANFENCE_HEALTH_WRITE_FAILURE_SECONDS). */
    private readonly writeFailureMs = 60_000,
  ) {}

  /** Records the files as they are now (right after the service opened them). */
  recordOpenedFiles(): void {
    if (!this.files) return;
    this.opened = [this.files.database, this.files.wal].flatMap((path) => {
      const identity = identityOf(path);
      return identity ? [{ path, identity }] : [];
    });
  }

  /** Why writes are refused, or null. Checks the files first (a few stat calls). */
  lost(): string | null {
    if (this.lostReason || !this.files) return this.lostReason;
    if (this.shmUnwritable()) return this.lostReason;
    for (const { path, identity } of this.opened) {
      let now: string | null;
      try {
        now = identityOf(path);
      } catch {
        continue;
      }
      if (now === identity) continue;
      const which = path === this.files.database ? 'database file' : 'database WAL file';
      this.lostReason = `the ${which} was ${now === null ? 'deleted' : 'replaced'} while the service ran; restart the service`;
      this.logger.error(
        `${path} was ${now === null ? 'deleted' : 'replaced'}: writes are refused and /health answers 503 until a restart (see docs/operations.md)`,
      );
      break;
    }
    return this.lostReason;
  }

  /** Why the last write failed for a storage reason, or null. */
  get unwritable(): string | null {
    return this.unwritableReason;
  }

  /**
   * Throws the coded refusal when the file is known to be lost (no file check here: the
   * commit checks the files before any write is acknowledged).
   */
  assertWritable(): void {
    if (!this.lostReason) this.shmUnwritable();
    if (this.lostReason) throw new StorageError(this.lostReason);
  }

  /**
   * SQLite's -shm file can no longer be written (sqlite-files.ts, EXIT_STORAGE_UNSAFE): the
   * service stops (its entry point exits); in a test process, writes are refused from now on.
   * Checked before every read too: a WAL reader marks its place in the mapped file, and the
   * timer's check (every SHM_CHECK_MS) may come after the next read. The file is checked once
   * per turn of the event loop: the reads and writes of one turn run one after another with
   * nothing between them that could notice a change sooner (two system calls each, 2–3% of
   * a publish's time on the request thread, when every write and read checked).
   */
  shmUnwritable(): boolean {
    if (!this.files || this.opened.length === 0) return false;
    if (this.shmCheckedThisTurn) return this.shmFoundUnwritable;
    this.shmCheckedThisTurn = true;
    setImmediate(() => {
      this.shmCheckedThisTurn = false;
    });
    const reason = unwritableShm(this.files);
    this.shmFoundUnwritable = reason != null;
    if (!reason) return false;
    this.lostReason = `the database's shared-memory file cannot be written; restart the service once it can`;
    reportStorageUnsafe(reason);
    return true;
  }

  /** A probe write committed: the database takes writes. */
  succeeded(): void {
    if (this.unwritableReason) this.logger.log('the database takes writes again');
    this.unwritableReason = null;
  }

  /**
   * A client's write committed. It clears a storage failure of an earlier one only when it
   * speaks for every write: on SQLite, when the file system has the room the largest write
   * needs (minFreeBytes). A small write (a lease renewal) fits on a disk where no plan does,
   * so a commit alone proves nothing; on PostgreSQL (no free-space reading here) the failure
   * therefore stands for `writeFailureMs` after the last one, whatever commits meanwhile.
   */
  committed(): void {
    if (!this.clientFailure) return;
    if (this.freeBytes() === null || this.lowSpace() !== null) return;
    this.clientFailure = null;
  }

  /** Free bytes (for unprivileged writers) on the SQLite file's file system; null where unknown. */
  freeBytes(): number | null {
    if (!this.files) return null;
    try {
      const stats = statfsSync(dirname(this.files.database));
      return Number(stats.bavail) * Number(stats.bsize);
    } catch {
      return null;
    }
  }

  /**
   * Why the largest write a client may make would not fit now: the SQLite file's file
   * system has less free space than minFreeBytes. Null when it has, or where not checked.
   */
  lowSpace(): string | null {
    if (this.minFreeBytes <= 0) return null;
    const free = this.freeBytes();
    if (free === null || free >= this.minFreeBytes) return null;
    const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;
    return (
      `the disk is nearly full: ${mib(free)} free where the largest allowed write needs ` +
      `${mib(this.minFreeBytes)} (PLANFENCE_STORAGE_MIN_FREE_BYTES)`
    );
  }

  /**
   * Why a client's write failed for a storage reason within the last `writeFailureMs`, when
   * none has committed since; null otherwise. A probe's small write that commits does not
   * clear it: a nearly full disk takes the probe and refuses every plan.
   */
  recentWriteFailure(now = performance.now()): string | null {
    const failure = this.clientFailure;
    if (!failure || now - failure.at >= this.writeFailureMs) return null;
    return `writes failed in the last ${Math.round((now - failure.at) / 1000)} s: ${failure.reason}`;
  }

  /** The error to give the client: a storage failure becomes STORAGE_UNAVAILABLE. */
  failed(error: unknown, probe = false): unknown {
    if (error instanceof DomainError) return error;
    const lost = this.lost();
    if (lost) return new StorageError(lost);
    const reason = storageFailureOf(error);
    if (!reason) return error;
    if (!probe) this.clientFailure = { reason, at: performance.now() };
    if (!this.unwritableReason)
      this.logger.error(`write failed: ${reason} (${(error as Error).message})`);
    this.unwritableReason = reason;
    return new StorageError(reason);
  }
}
