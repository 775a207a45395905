/**
 * The service's worker threads are started from source text (`new Worker(text, { eval:
 * true })`), so a worker body reaches nothing of its module's scope. What several bodies
 * share is written once here and put into each body's text by `workerSource`: a body
 * imports it (for its types and for tests that call the body in place) and calls it by the
 * same name, which the text defines before the body runs.
 */

/**
 * This thread's id (Linux: where its CPU time can be read, /proc/thread-self), or null
 * where there is none. With `lower`, the thread also drops below the request thread for the
 * scheduler (nice 10; on Linux a thread's nice value is its own): where cores are few, the
 * work it was given waits for a core, not `/health` and the small requests. Budgets count a
 * worker's own CPU time, so that wait is not charged to it. Self-contained: its source text
 * runs in the worker.
 */
export function ownThread(lower: boolean): number | null {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const fs = require('node:fs') as typeof import('node:fs');
  const os = require('node:os') as typeof import('node:os');
  /* eslint-enable @typescript-eslint/no-require-imports */
  let tid: number | null;
  try {
    tid = Number(/task\/(\d+)$/.exec(fs.readlinkSync('/proc/thread-self'))?.[1] ?? NaN);
    if (!Number.isFinite(tid)) tid = null;
  } catch {
    tid = null;
  }
  if (lower && tid !== null) {
    try {
      os.setPriority(tid, 10);
    } catch {
      // Not permitted or not Linux: the thread keeps the process's priority.
    }
  }
  return tid;
}

/** The text a worker is started from: the shared helpers above, then `main` called. */
export function workerSource(main: () => void): string {
  return `${ownThread.toString()}\n(${main.toString()})()`;
}
