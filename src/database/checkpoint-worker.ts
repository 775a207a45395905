/**
 * The body of the SQLite checkpoint thread. It is started from its source text
 * (`new Worker(..., { eval: true })`), so this function must stay self-contained: it reaches
 * better-sqlite3 through the path the checkpointer resolved (workerData).
 *
 * It opens a connection of its own to the service's database file and copies the WAL's
 * committed frames back into the database file (a PASSIVE checkpoint, which never waits for
 * the service's connection and never makes it wait) when `pages` frames wait to be copied,
 * or when any have waited `idleMs`. Every `intervalMs` it reads how many wait from the
 * WAL-index header in the `-shm` file (mxFrame at byte 16, nBackfill at byte 96, in the
 * machine's byte order: https://www.sqlite.org/walformat.html); a read that tears only makes
 * one look early or late. It reads no row and writes none.
 *
 * Messages in:  'stop' (closes the connection; the thread then ends).
 * Messages out: { ready: true } once, then { frames } after each checkpoint that copied
 *               frames, or { failed } when one failed (the next look tries again).
 */
export function checkpointWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const fs = require('node:fs') as typeof import('node:fs');
  const os = require('node:os') as typeof import('node:os');
  const { driver, path, synchronous, intervalMs, pages, idleMs } = threads.workerData as {
    driver: string;
    path: string;
    synchronous: string;
    intervalMs: number;
    pages: number;
    idleMs: number;
  };
  const Sqlite = require(driver) as typeof import('better-sqlite3');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const port = threads.parentPort!;
  const db = new Sqlite(path, { fileMustExist: true });
  // A checkpoint syncs the WAL before it copies and the database file after, as the
  // service's own connection would: the same durability.
  db.pragma(`synchronous = ${synchronous}`);
  // This connection never checkpoints on commit (it commits nothing); it must not keep pages.
  db.pragma('cache_size = -64');
  const header = Buffer.alloc(100);
  const little = os.endianness() === 'LE';
  let shm: number | null = null;
  /** The WAL's last frame and the frames copied back of it; null when the -shm file cannot be read. */
  const wal = (): { mxFrame: number; nBackfill: number } | null => {
    try {
      shm ??= fs.openSync(`${path}-shm`, 'r');
      if (fs.readSync(shm, header, 0, 100, 0) < 100) return { mxFrame: 0, nBackfill: 0 };
    } catch {
      return null;
    }
    const at = (offset: number) =>
      little ? header.readUInt32LE(offset) : header.readUInt32BE(offset);
    return { mxFrame: at(16), nBackfill: at(96) };
  };
  let last = Date.now();
  const tick = () => {
    const now = Date.now();
    const seen = wal();
    const frames = seen && (seen.mxFrame > seen.nBackfill ? seen.mxFrame - seen.nBackfill : 0);
    if (frames === 0) {
      last = now;
      return;
    }
    if ((frames === null || frames < pages) && now - last < idleMs) return;
    last = now;
    try {
      const [result] = db.pragma('wal_checkpoint(PASSIVE)') as {
        busy: number;
        log: number;
        checkpointed: number;
      }[];
      // checkpointed: frames of this WAL copied back so far (a restarted WAL counts from 0).
      const before = seen && seen.nBackfill <= result.checkpointed ? seen.nBackfill : 0;
      const copied = result.checkpointed - before;
      if (copied > 0) port.postMessage({ frames: copied });
    } catch (error) {
      port.postMessage({ failed: String((error as Error).message ?? error) });
    }
  };
  const timer = setInterval(tick, intervalMs);
  port.on('message', (message) => {
    if (message !== 'stop') return;
    clearInterval(timer);
    if (shm !== null) fs.closeSync(shm);
    db.close();
    port.close();
  });
  port.postMessage({ ready: true });
}
