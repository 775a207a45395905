/**
 * Terraform (or OpenTofu) plans end to end (DESIGN §15): `plan submit --terraform` sends the
 * JSON of a saved plan with the plan file itself; `deploy apply --terraform` applies exactly
 * that file, under a deployment, and reports terraform's outcome.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PlanfenceClient, PlanSummary, TerraformPlan } from '../../client/client.js';
import type { Deployment, Deployments } from '../../client/deployments.js';
import { readInput, UsageError } from '../command.js';

/** The program run as terraform: $PLANFENCE_TERRAFORM_BIN (e.g. tofu), else `terraform` on PATH. */
const terraformBin = () => process.env.PLANFENCE_TERRAFORM_BIN || 'terraform';

/** How much of terraform's output a FAILED deployment keeps as its detail. */
const DETAIL_CHARS = 2000;

interface Ran {
  code: number | null;
  stdout: string;
  /** stdout and stderr interleaved, as terraform wrote them. */
  output: string;
}

/** Runs terraform with `-chdir=DIR` (when given) and the arguments; `echo` gets its output as it comes. */
function terraform(
  args: string[],
  options: { chdir?: string; signal?: AbortSignal; echo?: (chunk: string) => void } = {},
): Promise<Ran> {
  const argv = [...(options.chdir ? [`-chdir=${options.chdir}`] : []), ...args];
  return new Promise((done, fail) => {
    const child = spawn(terraformBin(), argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TF_IN_AUTOMATION: '1', TF_INPUT: '0' },
      signal: options.signal,
      killSignal: 'SIGINT',
    });
    let stdout = '';
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      output += chunk;
      options.echo?.(chunk);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      options.echo?.(chunk);
    });
    child.on('error', (error) =>
      fail(
        (error as NodeJS.ErrnoException).code === 'ENOENT'
          ? new UsageError(`${terraformBin()} was not found on PATH`)
          : error,
      ),
    );
    child.on('close', (code) => done({ code, stdout, output }));
  });
}

/** "+1 ~2 -3 ±4" with the reads, as a reviewer reads a plan. */
export function counts(summary: PlanSummary | null): string {
  if (!summary) return 'no summary';
  const parts = [
    `${summary.add} to add`,
    `${summary.change} to change`,
    `${summary.destroy} to destroy`,
    `${summary.replace} to replace`,
  ];
  if (summary.read) parts.push(`${summary.read} to read`);
  return parts.join(', ');
}

/**
 * `plan submit ENV --terraform PLANFILE [--chdir DIR] [--generation G]
 * [--deployment-sequence N] [--source-revision REV] [--title T] [--key KEY]`: runs
 * `terraform show -json PLANFILE`, and submits the JSON with the plan file as its artifact,
 * under generation G or a lease the command takes (and releases). The plan is bound to
 * deployment sequence N: the environment's sequence when the plan was made, which the
 * caller read before `terraform plan` (`planfence env show ENV --json`); without it, the
 * sequence as the command reads it now.
 */
export async function submitTerraformPlan(
  client: PlanfenceClient,
  environment: string,
  options: {
    planFile: string;
    chdir?: string;
    generation?: number;
    deploymentSequence?: number;
    sourceRevision?: string;
    title?: string;
    idempotencyKey?: string;
  },
): Promise<TerraformPlan> {
  const shown = await terraform(['show', '-json', '-no-color', options.planFile], {
    chdir: options.chdir,
  });
  if (shown.code !== 0) {
    throw new UsageError(
      `terraform show -json ${options.planFile} failed:\n${shown.output.trim().slice(-DETAIL_CHARS)}`,
    );
  }
  const planFile = readInput(resolve(options.chdir ?? '.', options.planFile), 'plan file', 'bytes');
  const basedOnDeploymentSequence =
    options.deploymentSequence ?? (await client.deploymentSequence(environment));
  const submit = (generation: number) =>
    client.submitTerraformPlan({
      environment,
      generation,
      planJson: shown.stdout,
      planFile,
      basedOnDeploymentSequence,
      sourceRevision: options.sourceRevision,
      title: options.title,
      idempotencyKey: options.idempotencyKey,
    });
  if (options.generation !== undefined) return submit(options.generation);
  const lease = await client.acquireLease(environment, { ttlSeconds: 60 });
  try {
    return await submit(lease.generation);
  } finally {
    await client.releaseLease(environment, lease.generation).catch(() => undefined);
  }
}

/** terraform exited with an error: the deployment was finished FAILED with this detail. */
export class TerraformApplyFailed extends Error {}

/**
 * `deploy apply ENV --terraform [--chdir DIR]`: takes the environment's current plan,
 * refuses unless it is TERRAFORM_PLAN_JSON with an artifact, writes the artifact to a
 * temporary file and checks its SHA-256, and then, inside a deployment (heartbeats in the
 * background), runs `terraform apply -input=false PLANFILE`: SUCCEEDED on exit 0, else
 * FAILED with the tail of terraform's output as the detail (TerraformApplyFailed). A start
 * the service refuses (R18, R33) is thrown before terraform runs.
 */
export async function applyTerraformPlan(
  client: PlanfenceClient,
  deployments: Deployments,
  environment: string,
  options: { chdir?: string; heartbeatSeconds?: number; echo?: (chunk: string) => void },
): Promise<{ deployment: Deployment; plan: TerraformPlan }> {
  const current = await client.currentPlan(environment);
  if (!current) throw new UsageError(`nothing is published in ${environment}: nothing to apply`);
  const plan = await client.terraformPlan(current.id, { artifact: true });
  if (!plan || plan.contentType !== 'TERRAFORM_PLAN_JSON' || !plan.artifact) {
    throw new UsageError(
      `the current plan of ${environment}, ${current.id}, is not a Terraform plan with its plan file (contentType ${plan?.contentType ?? '?'}, ${plan?.artifact ? 'with' : 'no'} artifact)`,
    );
  }
  const bytes = Buffer.from(plan.artifact, 'base64');
  const hash = createHash('sha256').update(bytes).digest('hex');
  if (hash !== plan.artifactHash) {
    throw new UsageError(
      `the artifact of ${plan.id} has sha256 ${hash}, not the ${plan.artifactHash} the service recorded: not applying it`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'planfence-apply-'));
  const planFile = join(dir, 'plan.tfplan');
  writeFileSync(planFile, bytes, { mode: 0o600 });
  try {
    const { deployment } = await deployments.withDeployment(
      environment,
      async ({ signal }) => {
        const applied = await terraform(['apply', '-input=false', '-no-color', planFile], {
          chdir: options.chdir,
          signal,
          echo: options.echo,
        });
        const tail = applied.output.trim().slice(-DETAIL_CHARS);
        if (applied.code !== 0) {
          throw new TerraformApplyFailed(
            `terraform apply exited with ${applied.code ?? 'a signal'}: ${tail}`,
          );
        }
        return tail;
      },
      {
        planId: plan.id,
        heartbeatSeconds: options.heartbeatSeconds,
        describe: (tail) => (tail as string).slice(-DETAIL_CHARS),
      },
    );
    return { deployment, plan };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
