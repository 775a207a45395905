/**
 * A small, pure reference model of DESIGN.md's rules R1–R17 and R34–R36, written from the
 * design, not from the service's code. The model-based test runs the same commands
 * against it and against the real service and demands the same outcome codes and
 * the same observable state after every command.
 */
import { createHash } from 'node:crypto';

export type Mode = 'MONOTONIC' | 'STRICT';
export type Status = 'PROPOSED' | 'PUBLISHED' | 'SUPERSEDED' | 'OBSOLETE' | 'REJECTED' | 'EXPIRED';
export type Role = 'ADMIN' | 'AGENT' | 'REVIEWER';

/** R14: `count` distinct approvers of `group` (any where null), never the submitter. */
export interface Rule {
  group: string | null;
  count: number;
}

export const DEFAULT_RULES: Rule[] = [{ group: null, count: 1 }];

/**
 * DESIGN §16 as plain data: when a policy matches is a conjunction of facts about the
 * submit (an empty one always matches); the test turns it into the CEL the service runs.
 */
export interface ModelPolicy {
  name: string;
  effect: 'DENY' | 'WARN' | 'REQUIRE_APPROVAL';
  group: string | null;
  count: number;
  when: { submitter?: string; evenGeneration?: boolean; submitterGroup?: string };
}

/** R14, R35: one rule per group, the largest count, in the order groups first appear. */
export function mergeRules(...lists: Rule[][]): Rule[] {
  const merged: Rule[] = [];
  for (const rule of lists.flat()) {
    const found = merged.find((r) => r.group === rule.group);
    if (!found) merged.push({ ...rule });
    else found.count = Math.max(found.count, rule.count);
  }
  return merged;
}

export interface ModelPlan {
  id: string;
  environment: string;
  generation: number;
  sequence: number;
  status: Status;
  submittedBy: string;
  basedOnPlanId: string | null;
  contentHash: string;
  /** R16: null where the environment had no proposalTtlSeconds when it was submitted. */
  expiresAt: number | null;
  /** Approvers, in order; with the break-glass reason where given. */
  approvals: { approver: string; breakGlassReason: string | null }[];
  /** R34: each policy's result when the plan was submitted. */
  policyResults: { policy: string; matched: boolean }[];
  /** R35: what its REQUIRE_APPROVAL results added. */
  rules: Rule[];
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
  rules: Rule[];
  proposalTtlSeconds: number | null;
  /** R17: the freeze's reason and who froze, or null. */
  frozen: { reason: string; frozenBy: string } | null;
  /** §16: the plan policies, in order, and their version. */
  policies: ModelPolicy[];
  policyVersion: number;
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

  /** principal → its groups (R14). */
  readonly groups = new Map<string, Set<string>>();

  /**
   * R22: the events the outbox must hold, in commit order, as `environment type planId`
   * (plan.expired aside: when an expiry is stored depends on which write comes next, so
   * the test checks those separately).
   */
  readonly events: string[] = [];

  private announce(environment: string, type: string, planId: string | null = null): void {
    this.events.push(`${environment} ${type} ${planId ?? '-'}`);
  }

  constructor(
    now: number,
    private readonly idempotencyTtlMs: number,
  ) {
    this.now = now;
  }

  setGroups(principal: string, groups: string[]): string {
    this.groups.set(principal, new Set(groups));
    return 'OK';
  }

  /** R16: what a read shows; a PROPOSED plan reads EXPIRED from the instant its expiresAt comes. */
  statusOf(plan: ModelPlan): Status {
    return plan.status === 'PROPOSED' && plan.expiresAt != null && plan.expiresAt <= this.now
      ? 'EXPIRED'
      : plan.status;
  }

  /** R16: every write stores what reads already show. */
  private expire(): void {
    for (const plan of this.plans.values()) plan.status = this.statusOf(plan);
  }

  private counts(rule: Rule, approver: string, plan: ModelPlan): boolean {
    return (
      approver !== plan.submittedBy &&
      (rule.group == null || (this.groups.get(approver)?.has(rule.group) ?? false))
    );
  }

  /** R14, R35: the rules still unmet by `approvers`, each with the number of approvals it still needs. */
  private unmet(env: ModelEnvironment, plan: ModelPlan, approvers: string[]): Rule[] {
    return mergeRules(env.rules, plan.rules)
      .map((rule) => ({
        group: rule.group,
        count: rule.count - approvers.filter((a) => this.counts(rule, a, plan)).length,
      }))
      .filter((rule) => rule.count > 0);
  }

  /** Plan.pendingApprovalRules: void approvals count for nothing; a published plan needs nothing. */
  pendingRules(plan: ModelPlan): Rule[] {
    const env = this.environments.get(plan.environment)!;
    const status = this.statusOf(plan);
    if (status === 'PUBLISHED' || status === 'SUPERSEDED') return [];
    if (status !== 'PROPOSED') return mergeRules(env.rules, plan.rules);
    return this.unmet(
      env,
      plan,
      plan.approvals.map((a) => a.approver),
    );
  }

  updatePolicy(name: string, rules: Rule[] | undefined, ttl: number | null | undefined): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    if (rules) env.rules = rules.map((rule) => ({ ...rule }));
    if (ttl !== undefined) env.proposalTtlSeconds = ttl;
    return 'OK';
  }

  setPlanPolicies(name: string, policies: ModelPolicy[]): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    env.policies = policies.map((policy) => ({ ...policy }));
    env.policyVersion++;
    return 'OK';
  }

  private matches(policy: ModelPolicy, principal: string, generation: number): boolean {
    const { submitter, evenGeneration, submitterGroup } = policy.when;
    return (
      (submitter === undefined || submitter === principal) &&
      (evenGeneration === undefined || evenGeneration === (generation % 2 === 0)) &&
      (submitterGroup === undefined || (this.groups.get(principal)?.has(submitterGroup) ?? false))
    );
  }

  freeze(name: string, reason: string, by: string): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    env.frozen = { reason, frozenBy: by };
    this.announce(name, 'environment.frozen');
    return 'OK';
  }

  unfreeze(name: string): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    env.frozen = null;
    this.announce(name, 'environment.unfrozen');
    return 'OK';
  }

  liveLease(env: ModelEnvironment): ModelLease | null {
    return env.lease && env.lease.expiresAt > this.now ? env.lease : null;
  }

  createEnvironment(
    name: string,
    mode: Mode,
    requireApproval: boolean,
    rules: Rule[] = DEFAULT_RULES,
    proposalTtlSeconds: number | null = null,
  ): string {
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
      rules: rules.map((rule) => ({ ...rule })),
      proposalTtlSeconds,
      frozen: null,
      policies: [],
      policyVersion: 0,
    });
    return 'OK';
  }

  acquire(principal: string, name: string, ttlSeconds: number): string {
    this.expire();
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
    this.expire();
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
    this.expire();
    const env = this.environments.get(input.environment);
    if (!env) return { code: 'NOT_FOUND' };
    const g = input.generation;
    // R35: policies are decided first; a denied plan moves nothing.
    const policyResults = env.policies.map((policy) => ({
      policy: policy.name,
      matched: this.matches(policy, principal, g),
    }));
    if (env.policies.some((policy, i) => policy.effect === 'DENY' && policyResults[i].matched)) {
      return { code: 'POLICY_DENIED' };
    }
    const rules = mergeRules(
      env.policies
        .filter((p, i) => p.effect === 'REQUIRE_APPROVAL' && policyResults[i].matched)
        .map((p) => ({ group: p.group, count: p.count })),
    );
    if (env.grants.get(g) !== principal) return { code: 'UNKNOWN_GENERATION' };
    if (g < env.fence) return { code: 'STALE_GENERATION' };
    if (env.mode === 'STRICT') {
      const live = this.liveLease(env);
      if (!(g === env.fence && live && live.generation === g && live.principal === principal)) {
        return { code: 'LEASE_NOT_HELD' };
      }
    }
    const publish = !env.requireApproval && rules.length === 0;
    if (publish && env.frozen) return { code: 'FROZEN' };
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
      expiresAt:
        !publish && env.proposalTtlSeconds != null
          ? this.now + env.proposalTtlSeconds * 1000
          : null,
      approvals: [],
      policyResults,
      rules,
    };
    this.plans.set(plan.id, plan);
    this.announce(env.name, 'plan.submitted', plan.id);
    if (publish) this.publish(env, plan);
    this.markObsolete(env);
    return { planId: plan.id };
  }

  /**
   * R5–R7, R13–R17. The outcome code; INVALID_PLAN_STATE with the status, OK with the status
   * the plan has after the approval (PROPOSED: recorded, not yet publishing).
   */
  approve(
    reviewer: string,
    role: Role,
    planId: string,
    contentHash: string | null,
    breakGlassReason: string | null = null,
  ): string {
    this.expire();
    if (breakGlassReason != null && role !== 'ADMIN') return 'FORBIDDEN';
    const plan = this.plans.get(planId);
    if (!plan) return 'NOT_FOUND';
    const env = this.environments.get(plan.environment)!;
    if (plan.submittedBy === reviewer) return 'SELF_APPROVAL';
    if (contentHash != null && contentHash !== plan.contentHash) return 'PRECONDITION_FAILED';
    if (plan.generation < env.fence) return 'STALE_GENERATION';
    if (plan.status !== 'PROPOSED') return `INVALID_PLAN_STATE:${plan.status}`;
    if (plan.approvals.some((a) => a.approver === reviewer)) return 'ALREADY_APPROVED';
    if (env.current && !after(plan, env.current)) return 'INVALID_PLAN_STATE:OBSOLETE';
    const approvers = [...plan.approvals.map((a) => a.approver), reviewer];
    const completes = breakGlassReason != null || this.unmet(env, plan, approvers).length === 0;
    if (completes) {
      if (breakGlassReason == null && env.frozen) return 'FROZEN';
      if (plan.basedOnPlanId != null && env.current?.id !== plan.basedOnPlanId)
        return 'PRECONDITION_FAILED';
    }
    plan.approvals.push({ approver: reviewer, breakGlassReason });
    if (!completes) return 'OK:PROPOSED';
    this.publish(env, plan);
    this.markObsolete(env);
    return 'OK:PUBLISHED';
  }

  reject(planId: string): string {
    this.expire();
    const plan = this.plans.get(planId);
    if (!plan) return 'NOT_FOUND';
    if (plan.status !== 'PROPOSED') return 'INVALID_PLAN_STATE';
    plan.status = 'REJECTED';
    this.announce(plan.environment, 'plan.rejected', plan.id);
    return 'OK';
  }

  private publish(env: ModelEnvironment, plan: ModelPlan): void {
    if (env.current) env.current.status = 'SUPERSEDED';
    plan.status = 'PUBLISHED';
    env.current = plan;
    this.announce(env.name, 'plan.published', plan.id);
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
