import { TestEnvironment } from 'jest-environment-node';

/** How long closing what a test file left open may take before the run moves on. */
const CLOSE_GRACE_MS = 30_000;

/**
 * jest's node environment, which closes whatever apps a test file left open once the file's
 * own hooks have run (an `afterAll` in a setup file would run before them, and close an app
 * while the file's receivers still hold its requests). test/support/app.ts registers the
 * closer on the file's global. An app whose close hangs is reported and left to its worker.
 */
export default class PlanfenceEnvironment extends TestEnvironment {
  async teardown() {
    const close = this.global.__planfenceCloseOpenApps;
    if (typeof close === 'function') {
      let timer;
      await Promise.race([
        close().catch((error) =>
          console.warn(`closing the apps a test left open failed: ${String(error)}`),
        ),
        new Promise((resolve) => {
          timer = setTimeout(() => {
            console.warn(`apps a test left open did not close within ${CLOSE_GRACE_MS / 1000} s`);
            resolve();
          }, CLOSE_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    await super.teardown();
  }
}
