// A complete deployer: deploy the environment's current plan to a destination that fences
// by the deployment sequence. (In your project: import from 'planfence/client'.)
//
// planfence decides which plan may be applied and by whom, one deployment at a time, and
// gives each deployment the next sequence of its environment. It cannot stop a paused
// deployer from waking up and writing: the destination can. It remembers the highest
// sequence it applied and refuses anything not higher, so a deployer that was frozen past
// its heartbeat, reconciled and replaced can never overwrite the newer deployment.
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { DeploymentNotActiveError, Deployments, PlanfenceClient } from '../src/client/index.js';

/** What the destination holds: the applied plan and the sequence that applied it. */
interface Applied {
  sequence: number;
  planId: string;
  content: string;
}

/** Thrown by the destination when a deployment's sequence is not higher than the last applied. */
export class StaleDeploymentError extends Error {}

/**
 * A file destination that fences by sequence: the compare and the write happen under a
 * lock (an exclusive lock directory), and the write is atomic (a rename).
 */
export async function applyToFile(
  path: string,
  sequence: number,
  plan: { id: string; content: string },
): Promise<void> {
  const lock = `${path}.lock`;
  for (let attempt = 0; ; attempt++) {
    try {
      await mkdir(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 500) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  try {
    const last = await readFile(path, 'utf8').then(
      (text) => JSON.parse(text) as Applied,
      () => null,
    );
    if (last && sequence <= last.sequence) {
      throw new StaleDeploymentError(
        `deployment sequence ${sequence} is not above ${last.sequence}, which applied ${last.planId}`,
      );
    }
    const applied: Applied = { sequence, planId: plan.id, content: plan.content };
    await writeFile(`${path}.tmp`, JSON.stringify(applied));
    await rename(`${path}.tmp`, path);
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

export async function main(): Promise<void> {
  const environment = process.env.PLANFENCE_ENVIRONMENT ?? 'prod';
  const destination = process.env.DESTINATION ?? './applied.json';
  if (!process.env.PLANFENCE_TOKEN) {
    console.error(
      "set PLANFENCE_TOKEN to a DEPLOYER's token (issueToken; see docs/deployments.md)",
    );
    process.exitCode = 2;
    return;
  }
  const client = new PlanfenceClient({
    url: process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000',
    token: process.env.PLANFENCE_TOKEN,
  });
  try {
    const { deployment } = await new Deployments(client).withDeployment(
      environment,
      async ({ plan, sequence, signal }) => {
        // Your slow work goes here (terraform apply, a rollout, a migration). Check the signal.
        signal.throwIfAborted();
        await applyToFile(destination, sequence, plan);
        return `applied ${plan.id} with sequence ${sequence}`;
      },
      { heartbeatSeconds: 30, describe: (result) => String(result) },
    );
    console.log(`${deployment.id} ${deployment.status}: ${deployment.detail}`);
  } catch (error) {
    if (error instanceof DeploymentNotActiveError) {
      console.error(`the report was refused (${error.status}): a reviewer reconciled it meanwhile`);
      process.exitCode = 1;
    } else if (error instanceof StaleDeploymentError) {
      console.error(`the destination refused: ${error.message}`);
      process.exitCode = 1;
    } else throw error;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
