import { randomUUID } from 'node:crypto';
import type { Plan, PlanfenceClient, TerraformState } from './client.js';
import { TransportError } from './errors.js';

import type * as schema from './schema.js';

export type DeploymentStatus = schema.DeploymentStatus;
export type DeploymentOutcome = schema.DeploymentOutcome;

export interface Deployment {
  /** `<environment>#<sequence>` */
  id: string;
  environment: string;
  /** The fencing token to hand to the system that applies the plan. */
  sequence: number;
  plan: { id: string; contentHash: string };
  status: DeploymentStatus;
  startedBy: string;
  startedAt: string;
  heartbeatExpiresAt: string;
  finishedAt: string | null;
  detail: string | null;
  reconciledBy: string | null;
  reconcileNote: string | null;
}

/** Refusals of deployments, kept importable from here. */
export { DeploymentActiveError, DeploymentNotActiveError } from './errors.js';

export interface DeploymentContext {
  /** The plan being deployed: the environment's current plan when the deployment started. */
  plan: Plan;
  deployment: Deployment;
  /** The deployment sequence: pass it to the destination, which applies only a higher one than it last applied. */
  sequence: number;
  /** Aborts when a heartbeat is refused or cannot get through before the heartbeat expires: stop. */
  signal: AbortSignal;
}

export interface WithDeploymentOptions {
  /** How long a heartbeat keeps the deployment alive, 5–3600 (default 60). */
  heartbeatSeconds?: number;
  /** How often to heartbeat (default: a third of heartbeatSeconds). */
  heartbeatEveryMs?: number;
  /** The finish detail for a result (default: none). A failure's detail is its message. */
  describe?: (result: unknown) => string | undefined;
  /**
   * Deploy this plan, which must still be the current one when the deployment starts
   * (PRECONDITION_FAILED otherwise), instead of whatever plan is current: for a deployer
   * that checked the plan (its artifact) before deciding to deploy it.
   */
  planId?: string;
  /**
   * Read once the work has ended (succeeded or failed) and sent with the finish: the
   * Terraform state the deployment left (R56). Undefined or null, or a read that throws: no
   * state is sent.
   */
  state?: () => Promise<TerraformState | null | undefined>;
}

const DEPLOYMENT =
  'id environment sequence status startedBy startedAt heartbeatExpiresAt finishedAt detail reconciledBy reconcileNote plan { id contentHash }';

/**
 * Deployments of the published plan (docs/design.md §10) for deployers and reviewers:
 * `new Deployments(client)`. Start and finish carry one idempotency key per call, reused on
 * every retry of transport failures; refusals are thrown at once, never retried.
 */
export class Deployments {
  constructor(private readonly client: PlanfenceClient) {}

  private async call<T>(field: string, query: string, variables: Record<string, unknown>) {
    return (await this.client.request<Record<string, T>>(query, variables))[field];
  }

  start(
    environment: string,
    planId: string,
    options: { heartbeatSeconds?: number; idempotencyKey?: string } = {},
  ): Promise<Deployment> {
    const input = {
      environment,
      planId,
      heartbeatSeconds: options.heartbeatSeconds ?? 60,
      idempotencyKey: options.idempotencyKey ?? randomUUID(),
    };
    return this.client.retrying(() =>
      this.call<Deployment>(
        'startDeployment',
        `mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { ${DEPLOYMENT} } }`,
        { input },
      ),
    );
  }

  heartbeat(deploymentId: string, heartbeatSeconds = 60): Promise<Deployment> {
    return this.call<Deployment>(
      'heartbeatDeployment',
      `mutation($input: HeartbeatDeploymentInput!) { heartbeatDeployment(input: $input) { ${DEPLOYMENT} } }`,
      { input: { deploymentId, heartbeatSeconds } },
    );
  }

  /**
   * Finishes the deployment with its outcome. `state` is the Terraform state the apply left,
   * as the applier read it (`terraform state pull`: lineage and serial, R56), sent with
   * SUCCEEDED and with FAILED alike (a partial apply moves the serial too).
   */
  finish(
    deploymentId: string,
    outcome: DeploymentOutcome,
    options: { detail?: string; idempotencyKey?: string; state?: TerraformState | null } = {},
  ): Promise<Deployment> {
    const input = {
      deploymentId,
      outcome,
      detail: options.detail,
      idempotencyKey: options.idempotencyKey ?? randomUUID(),
      ...(options.state
        ? { state: { lineage: options.state.lineage, serial: options.state.serial } }
        : {}),
    };
    return this.client.retrying(() =>
      this.call<Deployment>(
        'finishDeployment',
        `mutation($input: FinishDeploymentInput!) { finishDeployment(input: $input) { ${DEPLOYMENT} } }`,
        { input },
      ),
    );
  }

  /** REVIEWER or ADMIN: resolves an UNKNOWN deployment with what actually happened. */
  reconcile(deploymentId: string, outcome: DeploymentOutcome, note: string): Promise<Deployment> {
    return this.call<Deployment>(
      'reconcileDeployment',
      `mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { ${DEPLOYMENT} } }`,
      { input: { deploymentId, outcome, note } },
    );
  }

  get(id: string): Promise<Deployment | null> {
    return this.call<Deployment | null>(
      'deployment',
      `query($id: ID!) { deployment(id: $id) { ${DEPLOYMENT} } }`,
      { id },
    );
  }

  /** Newest first. */
  list(
    environment: string,
    options: { first?: number; after?: string } = {},
  ): Promise<Deployment[]> {
    return this.call<Deployment[]>(
      'deployments',
      `query($e: String!, $first: Int!, $after: ID) { deployments(environment: $e, first: $first, after: $after) { ${DEPLOYMENT} } }`,
      { e: environment, first: options.first ?? 50, after: options.after },
    );
  }

  /**
   * Heartbeats a started deployment in the background until `stop()` (which waits for a beat
   * in flight). `signal` aborts when a heartbeat is refused (its reason is the refusal,
   * e.g. DeploymentNotActiveError) or cannot get through before the heartbeat would expire:
   * the deployment then reads UNKNOWN, and the work should stop. Judged on this process's
   * monotonic clock; the service's timestamps are not compared with ours.
   */
  keepAlive(
    deploymentId: string,
    options: { heartbeatSeconds?: number; heartbeatEveryMs?: number } = {},
  ): { signal: AbortSignal; stop: () => Promise<void> } {
    const heartbeatSeconds = options.heartbeatSeconds ?? 60;
    const everyMs = options.heartbeatEveryMs ?? (heartbeatSeconds * 1000) / 3;
    const controller = new AbortController();
    let beating = true;
    let stopBeating!: () => void;
    const stopped = new Promise<void>((resolve) => (stopBeating = resolve));
    const heartbeats = (async () => {
      let deadline = performance.now() + heartbeatSeconds * 1000;
      while (beating && !controller.signal.aborted) {
        // Woken early (and its timer cleared) when the work ends, so that nothing lingers.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, everyMs);
          void stopped.then(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        if (!beating) return;
        const beat = async () => {
          const sent = performance.now();
          await this.heartbeat(deploymentId, heartbeatSeconds);
          deadline = sent + heartbeatSeconds * 1000;
        };
        try {
          await beat();
        } catch (error) {
          // A transport failure is retried until the heartbeat would have expired; a refusal is final.
          if (!(error instanceof TransportError)) {
            controller.abort(error);
          } else if (performance.now() >= deadline - everyMs) {
            // Once more at once, on a new connection: after this process was paused, its pooled
            // one has usually been closed by the service, and the answer (often a refusal:
            // the deployment lapsed) is what the work must stop with.
            await beat().catch((again: unknown) => controller.abort(again));
          }
        }
      }
    })();
    return {
      signal: controller.signal,
      stop: async () => {
        beating = false;
        stopBeating();
        await heartbeats.catch(() => undefined);
      },
    };
  }

  /**
   * Deploys the environment's current plan: starts a deployment of it, heartbeats in the
   * background, hands `work` the plan, the deployment sequence (the token to pass to the
   * system that applies it) and a signal, and finishes SUCCEEDED when `work` resolves or
   * FAILED (with the error's message) when it throws, then rethrows.
   *
   * The signal aborts when a heartbeat is refused or cannot get through before the
   * heartbeat would expire: the deployment then reads UNKNOWN and may be reconciled by a
   * person, after which this deployer's report is refused (DeploymentNotActiveError). If
   * this process dies, nothing is reported: the deployment reads UNKNOWN, never SUCCEEDED.
   */
  async withDeployment<T>(
    environment: string,
    work: (context: DeploymentContext) => Promise<T>,
    options: WithDeploymentOptions = {},
  ): Promise<{ result: T; deployment: Deployment }> {
    const heartbeatSeconds = options.heartbeatSeconds ?? 60;
    const plan = options.planId
      ? await this.client.plan(options.planId)
      : await this.client.currentPlan(environment);
    if (!plan) {
      throw new Error(
        options.planId
          ? `plan ${options.planId} does not exist`
          : `environment "${environment}" has no published plan to deploy`,
      );
    }
    const deployment = await this.start(environment, plan.id, { heartbeatSeconds });
    const { signal, stop } = this.keepAlive(deployment.id, {
      heartbeatSeconds,
      heartbeatEveryMs: options.heartbeatEveryMs,
    });
    const state = async () => (await options.state?.().catch(() => null)) ?? null;
    let result: T;
    try {
      result = await work({
        plan,
        deployment,
        sequence: deployment.sequence,
        signal,
      });
    } catch (error) {
      await stop();
      // The work's failure is what the caller must see; a refused report (the deployment was
      // reconciled meanwhile) changes nothing about it.
      await this.finish(deployment.id, 'FAILED', {
        detail: (error as Error).message?.slice(0, 4096) || 'failed',
        state: await state(),
      }).catch(() => undefined);
      throw error;
    }
    await stop();
    const detail = options.describe?.(result);
    const finished = await this.finish(deployment.id, 'SUCCEEDED', {
      ...(detail ? { detail } : {}),
      state: await state(),
    });
    return { result, deployment: finished };
  }
}
