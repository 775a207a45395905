/**
 * Terraform (or OpenTofu) plans end to end (DESIGN §15): `plan submit --terraform` sends the
 * JSON of a saved plan with the plan file itself; `deploy apply --terraform` and `planfence
 * runner` apply exactly that file, under a deployment, after checking that it is the
 * reviewed plan (R55), and report terraform's outcome with the state it left (R56).
 */
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type {
  PlanfenceClient,
  PlanSummary,
  TerraformPlan,
  TerraformState,
} from '../../client/client.js';
import type { Deployment, DeploymentOutcome, Deployments } from '../../client/deployments.js';
import { reviewedPlanDifferences } from '../../terraform/reviewed-plan.js';
import { readInput, UsageError } from '../command.js';

/** The program run as terraform: $PLANFENCE_TERRAFORM_BIN (e.g. tofu), else `terraform` on PATH. */
const terraformBin = () => process.env.PLANFENCE_TERRAFORM_BIN || 'terraform';

/** How much of terraform's output a deployment keeps as its detail. */
const DETAIL_CHARS = 2000;

/** What starts the detail of a deployment whose plan file is not the reviewed plan (R55). */
export const NOT_REVIEWED = 'the plan file is not the reviewed plan: ';

interface Ran {
  code: number | null;
  stdout: string;
  /** stdout and stderr interleaved, as terraform wrote them. */
  output: string;
}

interface TerraformOptions {
  chdir?: string;
  /** Aborting it interrupts terraform (SIGINT: terraform stops gracefully, writing its state). */
  signal?: AbortSignal;
  /** Gets terraform's output as it comes. */
  echo?: (chunk: string) => void;
  /** Runs terraform in a process group of its own: a Ctrl-C at the terminal does not reach it. */
  detached?: boolean;
  /** Keep stdout out of `output` (it holds the state, with its secrets). */
  quietStdout?: boolean;
}

/** Runs terraform with `-chdir=DIR` (when given) and the arguments. */
function terraform(args: string[], options: TerraformOptions = {}): Promise<Ran> {
  const argv = [...(options.chdir ? [`-chdir=${options.chdir}`] : []), ...args];
  return new Promise((done, fail) => {
    const child = spawn(terraformBin(), argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TF_IN_AUTOMATION: '1', TF_INPUT: '0' },
      signal: options.signal,
      killSignal: 'SIGINT',
      detached: options.detached ?? false,
    });
    let stdout = '';
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (options.quietStdout) return;
      output += chunk;
      options.echo?.(chunk);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      options.echo?.(chunk);
    });
    child.on('error', (error) => {
      // An abort is reported by the exit that follows the interrupt.
      if ((error as NodeJS.ErrnoException).name === 'AbortError') return;
      fail(
        (error as NodeJS.ErrnoException).code === 'ENOENT'
          ? new UsageError(`${terraformBin()} was not found on PATH`)
          : error,
      );
    });
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
 * under generation G or a lease the command takes (and releases). The service reads the
 * state the plan file was computed from and binds the plan to it (R56); `--deployment-sequence
 * N` binds it to deployment sequence N as well (R33), and is sent only when given.
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
  const submit = (generation: number) =>
    client.submitTerraformPlan({
      environment,
      generation,
      planJson: shown.stdout,
      planFile,
      basedOnDeploymentSequence: options.deploymentSequence,
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

/**
 * R55: what differs between the reviewed plan's content and the plan file, rendered with
 * `terraform show -json PLANFILE` in the working directory (both masked as R54 masks,
 * reviewedPlanDifferences); [] when they agree. A rendering terraform cannot make is one line.
 */
export async function planFileDifferences(
  planFile: string,
  reviewedContent: string,
  chdir?: string,
): Promise<string[]> {
  const shown = await terraform(['show', '-json', '-no-color', planFile], { chdir });
  if (shown.code !== 0) {
    return [
      `terraform show -json could not render it (exit ${shown.code ?? 'by a signal'}): ${shown.output.trim().slice(-500)}`,
    ];
  }
  return reviewedPlanDifferences(reviewedContent, shown.stdout);
}

/**
 * R56: the lineage and serial of the working directory's state (`terraform state pull`);
 * null when there is none or it cannot be read. Nothing else of the state is kept.
 */
export async function readTerraformState(chdir?: string): Promise<TerraformState | null> {
  try {
    const pulled = await terraform(['state', 'pull'], { chdir, quietStdout: true });
    if (pulled.code !== 0 || !pulled.stdout.trim()) return null;
    const state = JSON.parse(pulled.stdout) as { lineage?: unknown; serial?: unknown };
    return typeof state.lineage === 'string' &&
      state.lineage &&
      typeof state.serial === 'number' &&
      Number.isSafeInteger(state.serial)
      ? { lineage: state.lineage, serial: state.serial }
      : null;
  } catch {
    return null;
  }
}

/** The deployment ended FAILED (reported, unless `reported` is false): terraform failed, or R55 refused the file. */
export class TerraformApplyFailed extends Error {
  constructor(
    /** One line: what failed, without terraform's output. */
    message: string,
    /** The deployment's detail as reported (terraform's output tail, or R55's differences). */
    readonly detail: string,
    /** The deployment as the finish left it (as started, if the report did not get through). */
    readonly deployment: Deployment,
    /** True: `terraform apply` never ran, the plan file is not the reviewed plan (R55). */
    readonly notReviewed: boolean,
    readonly state: TerraformState | null,
  ) {
    super(message);
    this.name = 'TerraformApplyFailed';
  }
}

/**
 * The outcome could not be reported: the finish was refused (the deployment was reconciled,
 * or its heartbeat lapsed and the service refuses it) or did not get through. The deployment
 * reads UNKNOWN once its heartbeat lapses, and a reviewer reconciles it (R20).
 */
export class DeploymentNotReported extends Error {
  constructor(
    readonly deployment: Deployment,
    readonly outcome: DeploymentOutcome,
    readonly state: TerraformState | null,
    override readonly cause: unknown,
    /** Sends the same finish again (the same idempotency key): a runner retries while the service is away. */
    readonly report: () => Promise<Deployment>,
  ) {
    super(
      `${deployment.id} ${outcome} could not be reported (${(cause as Error)?.message ?? String(cause)}): ` +
        `it reads UNKNOWN once its heartbeat lapses; a reviewer reconciles it (planfence deploy reconcile ${deployment.id} --outcome ${outcome} --note ...)`,
    );
    this.name = 'DeploymentNotReported';
  }
}

/** One step of an apply, for a caller that reports progress (the runner logs one line each). */
export type ApplyStep =
  | { step: 'started'; plan: TerraformPlan; deployment: Deployment }
  | { step: 'verified'; plan: TerraformPlan; deployment: Deployment }
  | { step: 'applying'; plan: TerraformPlan; deployment: Deployment }
  | { step: 'applied'; plan: TerraformPlan; deployment: Deployment; code: number | null };

export interface ApplyOptions {
  /** Apply this plan, which must still be current when the deployment starts (default: the current plan). */
  planId?: string;
  chdir?: string;
  heartbeatSeconds?: number;
  /** Gets terraform's output as it comes (`deploy apply` echoes it to stderr). */
  echo?: (chunk: string) => void;
  /** Aborting it interrupts terraform (SIGINT); an apply that has not begun does not begin. */
  interrupt?: AbortSignal;
  /** Run terraform in its own process group (the runner: the terminal's Ctrl-C is for the runner alone). */
  detached?: boolean;
  onStep?: (step: ApplyStep) => void;
}

/**
 * Applies a published Terraform plan: refuses (UsageError, before any deployment) unless the
 * plan is TERRAFORM_PLAN_JSON with an artifact whose SHA-256 is the recorded one; writes the
 * artifact to a temporary file (0600); starts a deployment of that plan (refusals thrown, before
 * terraform runs); then, with heartbeats in the background:
 *
 * 1. R55: renders the file with `terraform show -json` in the working directory and compares it
 *    with the plan's content; any difference finishes the deployment FAILED with a detail
 *    starting "the plan file is not the reviewed plan: " and `terraform apply` never runs;
 * 2. `terraform apply -input=false PLANFILE`;
 * 3. R56: reads the state it left (`terraform state pull`: lineage, serial) and finishes the
 *    deployment SUCCEEDED (exit 0) or FAILED (the tail of terraform's output) with that state.
 *
 * Returns the finished deployment; throws TerraformApplyFailed for a FAILED one, and
 * DeploymentNotReported when the finish could not be reported.
 */
export async function applyTerraformPlan(
  client: PlanfenceClient,
  deployments: Deployments,
  environment: string,
  options: ApplyOptions = {},
): Promise<{ deployment: Deployment; plan: TerraformPlan; state: TerraformState | null }> {
  const planId = options.planId ?? (await client.currentPlan(environment))?.id;
  if (!planId) throw new UsageError(`nothing is published in ${environment}: nothing to apply`);
  const plan = await client.terraformPlan(planId, { artifact: true });
  if (!plan || plan.contentType !== 'TERRAFORM_PLAN_JSON' || !plan.artifact) {
    throw new UsageError(
      `the current plan of ${environment}, ${planId}, is not a Terraform plan with its plan file (contentType ${plan?.contentType ?? '?'}, ${plan?.artifact ? 'with' : 'no'} artifact)`,
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
    const heartbeatSeconds = options.heartbeatSeconds ?? 60;
    const started = await deployments.start(environment, plan.id, { heartbeatSeconds });
    options.onStep?.({ step: 'started', plan, deployment: started });
    const alive = deployments.keepAlive(started.id, { heartbeatSeconds });
    const signal = options.interrupt
      ? AbortSignal.any([alive.signal, options.interrupt])
      : alive.signal;
    let outcome: DeploymentOutcome = 'FAILED';
    let detail: string;
    let headline: string;
    let state: TerraformState | null = null;
    let notReviewed = false;
    try {
      const differences = await planFileDifferences(planFile, plan.content, options.chdir);
      if (differences.length) {
        notReviewed = true;
        detail = `${NOT_REVIEWED}${differences.join('; ')}`;
        headline = detail;
      } else if (signal.aborted) {
        options.onStep?.({ step: 'verified', plan, deployment: started });
        detail = `stopped before terraform apply ran (${reason(signal)}): nothing was applied`;
        headline = detail;
      } else {
        options.onStep?.({ step: 'verified', plan, deployment: started });
        options.onStep?.({ step: 'applying', plan, deployment: started });
        const applied = await terraform(['apply', '-input=false', '-no-color', planFile], {
          chdir: options.chdir,
          signal,
          echo: options.echo,
          detached: options.detached,
        });
        options.onStep?.({ step: 'applied', plan, deployment: started, code: applied.code });
        state = await readTerraformState(options.chdir);
        const tail = applied.output.trim().slice(-DETAIL_CHARS);
        if (applied.code === 0) {
          outcome = 'SUCCEEDED';
          detail = tail;
          headline = 'terraform apply succeeded';
        } else {
          headline = `terraform apply exited with ${applied.code ?? 'a signal'}${signal.aborted ? ` (interrupted: ${reason(signal)})` : ''}`;
          detail = `${headline}: ${tail}`;
        }
      }
    } catch (error) {
      // Whatever went wrong once the deployment started is reported with it, never left silent.
      outcome = 'FAILED';
      headline = `the apply could not run: ${(error as Error).message}`;
      detail = headline;
    } finally {
      await alive.stop();
    }
    const finishKey = randomUUID();
    const report = () =>
      deployments.finish(started.id, outcome, { detail, state, idempotencyKey: finishKey });
    let finished: Deployment;
    try {
      finished = await report();
    } catch (error) {
      throw new DeploymentNotReported(started, outcome, state, error, report);
    }
    if (outcome === 'FAILED')
      throw new TerraformApplyFailed(headline, detail, finished, notReviewed, state);
    return { deployment: finished, plan, state };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Why a signal aborted, in words. */
function reason(signal: AbortSignal): string {
  const why: unknown = signal.reason;
  return why instanceof Error ? why.message : String(why);
}
