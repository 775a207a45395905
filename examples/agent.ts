// A complete planfence agent: take the lease (or wait for it while another holder has it),
// make a plan, submit it under the lease's generation, stop when the lease is lost.
// (In your project: import from 'planfence/client'.)
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import {
  LeaseHeldError,
  LeaseNotGrantedError,
  PlanfenceClient,
  QueueFullError,
  StaleGenerationError,
} from '../src/client/index.js';

async function makePlan(signal: AbortSignal): Promise<string> {
  // Your slow work goes here (an LLM call, terraform plan, ...). Check the signal.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  signal.throwIfAborted();
  return 'scale web to 4 replicas';
}

/** Runs the agent once on `environment`; returns the process's exit code. */
export async function runAgent(
  client: PlanfenceClient,
  environment = 'prod',
  maxWaitSeconds = 300,
): Promise<number> {
  const submit = (wait?: { maxWaitSeconds: number }) =>
    client.withLease(
      environment,
      async ({ generation, signal }) => {
        const content = await makePlan(signal);
        // Retries inside reuse one idempotency key; the generation never changes.
        return client.submitPlan({ environment, generation, content, title: 'resize web' });
      },
      { ttlSeconds: 30, instance: `worker-${process.pid}`, wait },
    );
  try {
    let plan;
    try {
      plan = await submit();
    } catch (error) {
      if (!(error instanceof LeaseHeldError)) throw error;
      // Another holder's lease is live: wait our turn in the lease queue rather than fail.
      console.error(
        `${environment} is leased to ${error.holder} until ${error.expiresAt.toISOString()}; waiting for it (at most ${maxWaitSeconds} s)`,
      );
      plan = await submit({ maxWaitSeconds });
    }
    console.log(`submitted ${plan.id} (${plan.status})`);
    return 0;
  } catch (error) {
    if (error instanceof StaleGenerationError) {
      console.error(`a newer holder wrote first (fence ${error.fence}); this plan is obsolete`);
      return 5;
    }
    if (error instanceof LeaseNotGrantedError || error instanceof QueueFullError) {
      console.error(`gave up waiting for the lease of ${environment}: ${error.message}`);
      return 6;
    }
    throw error;
  }
}

// Run as a program (node dist/examples/agent.js), not when imported.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  if (!process.env.PLANFENCE_TOKEN) {
    console.error("set PLANFENCE_TOKEN to an AGENT's token (issueToken; see the README)");
    process.exitCode = 2;
  } else {
    const client = new PlanfenceClient({
      url: process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000',
      token: process.env.PLANFENCE_TOKEN,
    });
    process.exitCode = await runAgent(client);
  }
}
