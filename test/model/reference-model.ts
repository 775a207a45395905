/**
 * A small, pure reference model of DESIGN.md's rules R1–R13, written from the
 * design, not from the service's code. The model-based test runs the same commands
 * against it and against the real service and demands the same outcome codes and
 * the same observable state after every command.
 */
import { createHash } from 'node:crypto';

export type Mode = 'MONOTONIC' | 'STRICT';
export type Status = 'PROPOSED' | 'PUBLISHED' | 'SUPERSEDED' | 'OBSOLETE' | 'REJECTED';

export interface ModelPlan {
  id: string;
  environment: string;
  generation: number;
  sequence: number;
  status: Status;
  submittedBy: string;
  basedOnPlanId: string | null;
  contentHash: string;
}

export interface ModelLease {
  holder: string;
  principal: string;
  generation: number;
  expiresAt: number;
}

export interface ModelEnvironment {
  name: string;
  mode: Mode;
  requireApproval: boolean;
  fence: number;
  lastIssued: number;
  lease: ModelLease | null;
  current: ModelPlan | null;
  /** generation → principal it was issued to */
  grants: Map<number, string>;
}

type Outcome = { planId: string } | { code: string };

export interface SubmitInput {
  environment: string;
  generation: number;
  idempotencyKey: string;
  content: string;
  basedOnPlanId: string | null;
}

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export class ReferenceModel {
  now: number;
  readonly environments = new Map<string, ModelEnvironment>();
  readonly plans = new Map<string, ModelPlan>();
  private readonly keys = new Map<
    string,
    { fingerprint: string; outcome: Outcome; expiresAt: number }
  >();

  constructor(
    now: number,
    private readonly idempotencyTtlMs: number,
  ) {
    this.now = now;
  }

  liveLease(env: ModelEnvironment): ModelLease | null {
    return env.lease && env.lease.expiresAt > this.now ? env.lease : null;
  }

  createEnvironment(name: string, mode: Mode, requireApproval: boolean): string {
    if (this.environments.has(name)) return 'ALREADY_EXISTS';
    this.environments.set(name, {
      name,
      mode,
      requireApproval,
      fence: 0,
      lastIssued: 0,
      lease: null,
      current: null,
      grants: new Map(),
    });
    return 'OK';
  }

  acquire(principal: string, name: string, ttlSeconds: number): string {
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    const live = this.liveLease(env);
    if (live && live.holder !== principal) return 'LEASE_HELD';
    const generation = ++env.lastIssued;
    env.grants.set(generation, principal);
    env.lease = {
      holder: principal,
      principal,
      generation,
      expiresAt: this.now + ttlSeconds * 1000,
    };
    if (env.mode === 'STRICT') env.fence = generation;
    this.markObsolete(env);
    return 'OK';
  }

  private leaseCheck(
    principal: string,
    name: string,
    generation: number,
  ): string | ModelEnvironment {
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    const live = this.liveLease(env);
    if (live && live.generation === generation && live.principal === principal) return env;
    if (env.grants.get(generation) !== principal) return 'UNKNOWN_GENERATION';
    return 'LEASE_NOT_HELD';
  }

  renew(principal: string, name: string, generation: number, ttlSeconds: number): string {
    const env = this.leaseCheck(principal, name, generation);
    if (typeof env === 'string') return env;
    env.lease!.expiresAt = this.now + ttlSeconds * 1000;
    return 'OK';
  }

  release(principal: string, name: string, generation: number): string {
    const env = this.leaseCheck(principal, name, generation);
    if (typeof env === 'string') return env;
    env.lease = null;
    return 'OK';
  }

  /** R9 around R3–R5: the outcome code, and the plan id when accepted. */
  submit(principal: string, input: SubmitInput): Outcome {
    const fingerprint = JSON.stringify([
      'submitPlan',
      input.environment,
      input.generation,
      input.content,
      input.basedOnPlanId,
    ]);
    const slot = `${principal}\u0000${input.idempotencyKey}`;
    const remembered = this.keys.get(slot);
    if (remembered && remembered.expiresAt > this.now) {
      return remembered.fingerprint === fingerprint
        ? remembered.outcome
        : { code: 'IDEMPOTENCY_KEY_REUSED' };
    }
    const outcome = this.admit(principal, input);
    this.keys.set(slot, { fingerprint, outcome, expiresAt: this.now + this.idempotencyTtlMs });
    return outcome;
  }

  private admit(principal: string, input: SubmitInput): Outcome {
    const env = this.environments.get(input.environment);
    if (!env) return { code: 'NOT_FOUND' };
    const g = input.generation;
    if (env.grants.get(g) !== principal) return { code: 'UNKNOWN_GENERATION' };
    if (g < env.fence) return { code: 'STALE_GENERATION' };
    if (env.mode === 'STRICT') {
      const live = this.liveLease(env);
      if (!(g === env.fence && live && live.generation === g && live.principal === principal)) {
        return { code: 'LEASE_NOT_HELD' };
      }
    }
    const publish = !env.requireApproval;
    if (publish && input.basedOnPlanId != null && env.current?.id !== input.basedOnPlanId) {
      return { code: 'PRECONDITION_FAILED' };
    }
    env.fence = g;
    const sequence =
      1 +
      [...this.plans.values()].filter((p) => p.environment === env.name && p.generation === g)
        .length;
    const plan: ModelPlan = {
      id: `${env.name}@${g}.${sequence}`,
      environment: env.name,
      generation: g,
      sequence,
      status: 'PROPOSED',
      submittedBy: principal,
      basedOnPlanId: input.basedOnPlanId,
      contentHash: sha256(input.content),
    };
    this.plans.set(plan.id, plan);
    if (publish) this.publish(env, plan);
    this.markObsolete(env);
    return { planId: plan.id };
  }

  approve(reviewer: string, planId: string, contentHash: string | null): string {
    const plan = this.plans.get(planId);
    if (!plan) return 'NOT_FOUND';
    const env = this.environments.get(plan.environment)!;
    if (plan.submittedBy === reviewer) return 'SELF_APPROVAL';
    if (contentHash != null && contentHash !== plan.contentHash) return 'PRECONDITION_FAILED';
    if (plan.generation < env.fence) return 'STALE_GENERATION';
    if (plan.status !== 'PROPOSED') return 'INVALID_PLAN_STATE';
    if (env.current && !after(plan, env.current)) return 'INVALID_PLAN_STATE';
    if (plan.basedOnPlanId != null && env.current?.id !== plan.basedOnPlanId)
      return 'PRECONDITION_FAILED';
    this.publish(env, plan);
    this.markObsolete(env);
    return 'OK';
  }

  reject(planId: string): string {
    const plan = this.plans.get(planId);
    if (!plan) return 'NOT_FOUND';
    if (plan.status !== 'PROPOSED') return 'INVALID_PLAN_STATE';
    plan.status = 'REJECTED';
    return 'OK';
  }

  private publish(env: ModelEnvironment, plan: ModelPlan): void {
    if (env.current) env.current.status = 'SUPERSEDED';
    plan.status = 'PUBLISHED';
    env.current = plan;
  }

  /** R8 */
  private markObsolete(env: ModelEnvironment): void {
    for (const plan of this.plans.values()) {
      if (plan.environment !== env.name || plan.status !== 'PROPOSED') continue;
      if (plan.generation < env.fence || (env.current && !after(plan, env.current)))
        plan.status = 'OBSOLETE';
    }
  }
}

/** (generation, sequence) of `a` strictly after `b`'s. */
function after(a: ModelPlan, b: ModelPlan): boolean {
  return a.generation > b.generation || (a.generation === b.generation && a.sequence > b.sequence);
}
