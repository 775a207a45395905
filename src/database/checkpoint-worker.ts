/**
 * The body of the SQLite checkpoint thread. It is started from its source text
 * (`new Worker(..., { eval: true })`), so this function must stay self-contained: it reaches
 * better-sqlite3 through the path the checkpointer resolved (workerData).
 *
 * It opens a connection of its own to the service's database file and, every `intervalMs`,
 * copies the WAL's committed frames back into the database file: a PASSIVE checkpoint,
 * which never waits for the service's connection and never makes it wait. It reads nothing
 * and writes no row.
 *
 * Messages in:  'stop' (closes the connection; the thread then ends).
 * Messages out: { ready: true } once, then { frames } after each checkpoint that copied
 *               frames, or { failed } when one failed (the next tick tries again).
 */
export function checkpointWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const { driver, path, synchronous, intervalMs } = threads.workerData as {
    driver: string;
    path: string;
    synchronous: string;
    intervalMs: number;
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
  let copied = 0;
  const tick = () => {
    try {
      const [result] = db.pragma('wal_checkpoint(PASSIVE)') as {
        busy: number;
        log: number;
        checkpointed: number;
      }[];
      // checkpointed counts every frame copied back so far in this WAL; a restarted WAL
      // starts again from zero.
      const now = result.checkpointed;
      const frames = now >= copied ? now - copied : now;
      copied = now;
      if (frames > 0) port.postMessage({ frames });
    } catch (error) {
      port.postMessage({ failed: String((error as Error).message ?? error) });
    }
  };
  const timer = setInterval(tick, intervalMs);
  port.on('message', (message) => {
    if (message !== 'stop') return;
    clearInterval(timer);
    db.close();
    port.close();
  });
  port.postMessage({ ready: true });
}
