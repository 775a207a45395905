// The agent of examples/github-actions/planfence.yml: authenticates with the job's OIDC
// token (no stored secret), takes the lease on staging-eu, submits a plan under its
// generation. (In your project: import from 'planfence/client'.)
import { fromGitHubActions } from '../../src/client/index.js';

const client = await fromGitHubActions({
  url: process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000',
  audience: 'planfence',
});
const me = await client.whoami();
console.log(`acting as ${me.name} (${me.role})`);

const plan = await client.withLease(
  'staging-eu',
  async ({ generation }) =>
    client.submitPlan({
      environment: 'staging-eu',
      generation,
      content: `built by ${process.env.GITHUB_SHA ?? 'a local run'}`,
    }),
  { ttlSeconds: 300 },
);
console.log(`submitted ${plan.id}`);
