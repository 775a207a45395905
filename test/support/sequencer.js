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
  ['postgres test/model.test.ts', 50],
  ['sqlite test/fault.test.ts', 84],
  ['sqlite test/operator/storage.test.ts', 78],
  ['sqlite test/cli.test.ts', 48],
  ['sqlite test/model.test.ts', 45],
  ['sqlite test/pack.test.ts', 37],
  ['sqlite test/demo.test.ts', 37],
  ['postgres test/deployments-model.test.ts', 35],
  ['sqlite test/webhooks-crash.test.ts', 28],
  ['sqlite test/client.test.ts', 24],
  ['sqlite test/mcp.test.ts', 23],
  ['sqlite test/console.test.ts', 23],
  ['postgres test/operator/storage.test.ts', 23],
  ['postgres test/webhooks-crash.test.ts', 22],
  ['postgres test/operator/admin-bootstrap.test.ts', 22],
  ['postgres test/dashboard.test.ts', 21],
  ['postgres test/webhooks.test.ts', 20],
  ['sqlite test/deployments-model.test.ts', 18],
  ['postgres test/plan-policies.test.ts', 18],
  ['postgres test/deployments-crash.test.ts', 18],
  ['sqlite test/operator/admin-bootstrap.test.ts', 17],
  ['sqlite test/deployments-crash.test.ts', 17],
  ['sqlite test/console-layout.test.ts', 17],
  ['postgres test/hostile/replays.test.ts', 16],
  ['sqlite test/plan-policies.test.ts', 15],
  ['sqlite test/hostile/http.test.ts', 15],
  ['sqlite test/docs.test.ts', 15],
  ['sqlite test/dashboard.test.ts', 15],
  ['postgres test/subscriptions-instances.test.ts', 15],
  ['sqlite test/startup.test.ts', 14],
  ['sqlite test/startup-logs.test.ts', 14],
  ['sqlite test/agent-example.test.ts', 14],
  ['postgres test/hostile/player.test.ts', 14],
  ['sqlite test/webhooks.test.ts', 13],
  ['sqlite test/terraform-cli.test.ts', 13],
  ['postgres test/startup.test.ts', 13],
  ['postgres test/mcp.test.ts', 13],
  ['postgres test/hostile/requests.test.ts', 13],
  ['sqlite test/hostile/replays.test.ts', 12],
  ['postgres test/webhooks-batches.test.ts', 12],
  ['sqlite test/policies.test.ts', 11],
  ['sqlite test/hostile/player.test.ts', 11],
  ['sqlite test/deployments-client.test.ts', 11],
  ['postgres test/restore.test.ts', 11],
  ['postgres test/lease-queue.test.ts', 11],
  ['postgres test/hostile/quotas.test.ts', 11],
  ['postgres test/webhooks-instances.test.ts', 10],
  ['postgres test/large-plans.test.ts', 10],
  ['postgres test/deployments.test.ts', 10],
  ['sqlite test/policy-cookbook.test.ts', 9],
  ['sqlite test/hostile/requests.test.ts', 9],
  ['postgres test/webhooks-lines.test.ts', 9],
  ['postgres test/policies.test.ts', 9],
  ['sqlite test/large-plans.test.ts', 8],
  ['postgres test/generations.test.ts', 8],
  ['postgres test/concurrency.test.ts', 8],
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
