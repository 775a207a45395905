import { closeOpenApps } from './app.js';

/** How long closing what a test file left open may take before the run moves on. */
const CLOSE_GRACE_MS = 30_000;

// A test that fails before closing its apps leaves nothing running for the rest of the run.
// An app whose close hangs (e.g. a request in flight to a receiver that never answers) is
// reported and left to its worker process, which ends with the file's worker.
afterAll(async () => {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    closeOpenApps().catch((error: unknown) =>
      console.warn(`closing the apps a test left open failed: ${String(error)}`),
    ),
    new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        console.warn(`apps a test left open did not close within ${CLOSE_GRACE_MS / 1000} s`);
        resolve();
      }, CLOSE_GRACE_MS);
      timer.unref();
    }),
  ]);
  // A close that finished in time leaves no timer to report a hang later.
  clearTimeout(timer);
}, CLOSE_GRACE_MS + 15_000);
