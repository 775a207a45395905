/**
 * The order in which jest hands test files to its workers: the files that failed last
 * time first (as jest's own order), then the longest, so that no worker is left with a
 * long file while the other has nothing (the run ends when its last file does). The
 * duration is jest's own record of the last run on this machine, else the typical
 * duration below (a run of `npm test` on 2 cores, in seconds), else a second. Jest's own
 * fallback, the file's size, puts the short files that start many processes (the fault
 * harnesses, the demo, the package) last.
 */
import Sequencer from '@jest/test-sequencer';

const TYPICAL_SECONDS = new Map([
  ['sqlite test/operator/storage.test.ts', 103],
  ['postgres test/model.test.ts', 91],
  ['sqlite test/fault.test.ts', 78],
  ['sqlite test/cli.test.ts', 54],
  ['sqlite test/model.test.ts', 53],
  ['postgres test/deployments-model.test.ts', 43],
  ['sqlite test/pack.test.ts', 37],
  ['postgres test/mcp.test.ts', 37],
  ['postgres test/operator/admin-bootstrap.test.ts', 35],
  ['sqlite test/demo.test.ts', 34],
  ['sqlite test/mcp.test.ts', 33],
  ['postgres test/operator/storage.test.ts', 31],
  ['sqlite test/webhooks-crash.test.ts', 27],
  ['sqlite test/operator/admin-bootstrap.test.ts', 25],
  ['sqlite test/client.test.ts', 24],
  ['postgres test/webhooks-crash.test.ts', 24],
  ['sqlite test/console-layout.test.ts', 23],
  ['sqlite test/console.test.ts', 22],
  ['postgres test/dashboard.test.ts', 22],
  ['postgres test/webhooks.test.ts', 22],
  ['sqlite test/deployments-model.test.ts', 21],
  ['sqlite test/docs.test.ts', 19],
  ['postgres test/hostile/player.test.ts', 19],
  ['postgres test/deployments-crash.test.ts', 18],
  ['sqlite test/startup-logs.test.ts', 17],
  ['sqlite test/deployments-crash.test.ts', 17],
  ['postgres test/policies.test.ts', 16],
  ['sqlite test/agent-example.test.ts', 16],
  ['postgres test/hostile/http.test.ts', 16],
  ['postgres test/deployments.test.ts', 16],
  ['postgres test/plan-policies.test.ts', 15],
  ['sqlite test/dashboard.test.ts', 14],
  ['postgres test/subscriptions-instances.test.ts', 13],
  ['sqlite test/webhooks.test.ts', 13],
  ['sqlite test/hostile/http.test.ts', 13],
  ['sqlite test/plan-policies.test.ts', 13],
  ['sqlite test/hostile/player.test.ts', 13],
  ['postgres test/lease-queue.test.ts', 12],
  ['sqlite test/policies.test.ts', 12],
  ['postgres test/hostile/replays.test.ts', 11],
  ['postgres test/hostile/requests.test.ts', 11],
  ['sqlite test/terraform-cli.test.ts', 11],
  ['sqlite test/deployments-client.test.ts', 10],
  ['postgres test/startup.test.ts', 10],
  ['postgres test/webhooks-instances.test.ts', 10],
  ['postgres test/hostile/quotas.test.ts', 10],
  ['sqlite test/hostile/replays.test.ts', 9],
  ['postgres test/hostile/inputs.test.ts', 9],
  ['postgres test/hostile/sockets.test.ts', 8],
  ['postgres test/policy-cookbook.test.ts', 8],
  ['postgres test/concurrency.test.ts', 8],
  ['sqlite test/hostile/requests.test.ts', 8],
]);

export default class LongestFirst extends Sequencer {
  sort(tests) {
    const root = (test) => test.context.config.rootDir;
    const seconds = (test) => {
      const recorded = this.time(test);
      if (recorded != null) return recorded / 1000;
      const key = `${test.context.config.displayName?.name} ${test.path.slice(root(test).length + 1)}`;
      return TYPICAL_SECONDS.get(key) ?? 1;
    };
    const failed = (test) => (this.hasFailed(test) ? 1 : 0);
    return [...tests].sort((a, b) => failed(b) - failed(a) || seconds(b) - seconds(a));
  }
}
