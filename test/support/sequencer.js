/**
 * The order in which jest hands test files to its workers: the files that failed last
 * time first (as jest's own order), then the longest, so that no worker is left with a
 * long file while the other has nothing (the run ends when its last file does). The
 * duration is jest's own record of the last run on this machine, else the typical
 * duration below (a fresh clone's `.ci/run` on 2 cores, both databases, in seconds; files
 * under 8 s left out), else a second. Jest's own
 * fallback, the file's size, puts the short files that start many processes (the fault
 * harnesses, the demo, the package) last.
 */
import Sequencer from '@jest/test-sequencer';

const TYPICAL_SECONDS = new Map([
  ['sqlite test/operator/storage.test.ts', 84],
  ['sqlite test/fault.test.ts', 84],
  ['postgres test/hostile-replays-stall.test.ts', 54],
  ['sqlite test/cli.test.ts', 48],
  ['sqlite test/image.test.ts', 47],
  ['postgres test/model.test.ts', 45],
  ['sqlite test/docs.test.ts', 43],
  ['sqlite test/mcp.test.ts', 38],
  ['sqlite test/pack.test.ts', 36],
  ['sqlite test/runner.test.ts', 33],
  ['postgres test/deployments-model.test.ts', 33],
  ['sqlite test/demo.test.ts', 31],
  ['postgres test/operator/admin-bootstrap.test.ts', 25],
  ['sqlite test/model.test.ts', 25],
  ['sqlite test/hostile-replays-stall.test.ts', 25],
  ['postgres test/slack-crash.test.ts', 22],
  ['postgres test/webhooks.test.ts', 21],
  ['sqlite test/operator/admin-bootstrap.test.ts', 21],
  ['sqlite test/deployments-model.test.ts', 19],
  ['sqlite test/plan-policies.test.ts', 19],
  ['postgres test/plan-policies.test.ts', 18],
  ['sqlite test/console.test.ts', 18],
  ['postgres test/mcp.test.ts', 17],
  ['postgres test/hostile-escaped-bytes.test.ts', 17],
  ['sqlite test/webhooks-crash.test.ts', 16],
  ['postgres test/hostile/requests.test.ts', 16],
  ['postgres test/preconditions.test.ts', 16],
  ['postgres test/operator/storage.test.ts', 15],
  ['sqlite test/mcp-clients.test.ts', 15],
  ['postgres test/webhooks-crash.test.ts', 15],
  ['sqlite test/deployments-crash.test.ts', 14],
  ['sqlite test/startup-logs.test.ts', 14],
  ['sqlite test/webhooks.test.ts', 13],
  ['postgres test/startup.test.ts', 13],
  ['postgres test/deployments-crash.test.ts', 13],
  ['postgres test/subscriptions-instances.test.ts', 13],
  ['postgres test/mcp-batches.test.ts', 13],
  ['postgres test/round-trips.test.ts', 13],
  ['sqlite test/startup.test.ts', 12],
  ['sqlite test/dashboard.test.ts', 12],
  ['sqlite test/hostile/http.test.ts', 12],
  ['postgres test/deployments.test.ts', 12],
  ['sqlite test/hostile-escaped-bytes.test.ts', 12],
  ['sqlite test/policy-cookbook.test.ts', 12],
  ['sqlite test/policies.test.ts', 12],
  ['postgres test/webhooks-batches.test.ts', 12],
  ['postgres test/webhooks-failing.test.ts', 12],
  ['sqlite test/sensitive.test.ts', 11],
  ['postgres test/hostile/player.test.ts', 11],
  ['sqlite test/terraform-cli.test.ts', 11],
  ['postgres test/lease-queue.test.ts', 10],
  ['sqlite test/slack-crash.test.ts', 10],
  ['sqlite test/console-layout.test.ts', 10],
  ['postgres test/metrics-access.test.ts', 10],
  ['sqlite test/hostile/player.test.ts', 9],
  ['postgres test/identity-access-tokens.test.ts', 9],
  ['sqlite test/metrics-access.test.ts', 9],
  ['postgres test/sessions.test.ts', 9],
  ['postgres test/webhooks-lines.test.ts', 8],
  ['sqlite test/storage-shm.test.ts', 8],
  ['postgres test/slack.test.ts', 8],
  ['postgres test/roles.test.ts', 8],
  ['postgres test/policies.test.ts', 8],
  ['sqlite test/mcp-batches.test.ts', 8],
  ['postgres test/hostile-refusal-flood.test.ts', 8],
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
