/**
 * A real agent process for the fault harnesses. It does what an agent does, on its
 * own clock: acquire a lease, build a plan (which takes a moment), send it. It says
 * what it is doing on stdout, one JSON line per step, so that the harness can freeze
 * it (SIGSTOP) at a chosen point and thaw it (SIGCONT) later. It keeps its generation
 * in memory across the pause, as a real agent would. With `bound`, it reads the
 * environment's deployment sequence while it builds its plan and submits the plan as made
 * against it (R33), as `planfence plan submit --terraform` does.
 *
 *   node agent.js URL TOKEN ENVIRONMENT TTL_SECONDS CONTENT STEP_DELAY_MS [bound]
 */
import { createHash } from 'node:crypto';

const [url, token, environment, ttl, content, stepDelay, bound] = process.argv.slice(2);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

async function gql(query: string, variables: Record<string, unknown>) {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as {
    data: Record<string, Record<string, unknown>> | null;
    errors?: { extensions: Record<string, unknown> }[];
  };
}

async function main() {
  const lease = await gql(
    'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }',
    { input: { environment, ttlSeconds: Number(ttl) } },
  );
  if (lease.errors) return say({ step: 'result', code: lease.errors[0].extensions.code });
  const generation = lease.data!.acquireLease.generation as number;
  say({ step: 'acquired', generation });
  await pause(Number(stepDelay));

  let basedOnDeploymentSequence: number | undefined;
  if (bound === 'bound') {
    const state = await gql(
      'query($name: String!) { environment(name: $name) { deploymentSequence } }',
      { name: environment },
    );
    basedOnDeploymentSequence = state.data!.environment.deploymentSequence as number;
  }
  const plan = { content, hash: createHash('sha256').update(content).digest('hex') };
  say({ step: 'built', generation, hash: plan.hash, basedOnDeploymentSequence });
  await pause(Number(stepDelay));

  say({ step: 'sending', generation });
  const submitted = await gql(
    'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
    {
      input: {
        environment,
        generation,
        content: plan.content,
        idempotencyKey: `${environment}-${generation}-${plan.hash.slice(0, 16)}`,
        basedOnDeploymentSequence,
      },
    },
  );
  if (submitted.errors) {
    return say({ step: 'result', generation, ...submitted.errors[0].extensions });
  }
  say({ step: 'result', generation, code: 'OK', planId: submitted.data!.submitPlan.id });
}

main().catch((error: unknown) => {
  say({ step: 'result', code: 'AGENT_FAILED', message: String(error) });
  process.exitCode = 1;
});
