// A complete planfence agent: take the lease, make a plan, submit it under the lease's
// generation, stop when the lease is lost. (In your project: import from 'planfence/client'.)
import { PlanfenceClient, StaleGenerationError } from '../src/client/index.js';

const client = new PlanfenceClient({
  url: process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000',
  token: process.env.PLANFENCE_TOKEN ?? '',
});

async function makePlan(signal: AbortSignal): Promise<string> {
  // Your slow work goes here (an LLM call, terraform plan, ...). Check the signal.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  signal.throwIfAborted();
  return 'scale web to 4 replicas';
}

try {
  const plan = await client.withLease(
    'prod',
    async ({ generation, signal }) => {
      const content = await makePlan(signal);
      // Retries inside reuse one idempotency key; the generation never changes.
      return client.submitPlan({ environment: 'prod', generation, content, title: 'resize web' });
    },
    { ttlSeconds: 30, instance: `worker-${process.pid}` },
  );
  console.log(`submitted ${plan.id} (${plan.status})`);
} catch (error) {
  if (error instanceof StaleGenerationError) {
    console.error(`a newer holder wrote first (fence ${error.fence}); this plan is obsolete`);
  } else throw error;
}
