/**
 * A small, pure reference model of DESIGN.md's rules R1–R17, R34–R36 and the lease queue (R37–R39), written from the
 * design, not from the service's code. The model-based test runs the same commands
 * against it and against the real service and demands the same outcome codes and
 * the same observable state after every command.
 */
import { createHash } from 'node:crypto';

/** R1: the largest generation an environment issues (a GraphQL Int). */
const LAST_GENERATION = 2 ** 31 - 1;

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

export type TicketStatus = 'WAITING' | 'GRANTED' | 'SUPERSEDED' | 'EXPIRED' | 'CANCELLED';
export type QueueMode = 'FIFO' | 'LATEST';

/** §17: one place in an environment's lease queue; `index` orders the queue (creation order). */
export interface ModelTicket {
  index: number;
  environment: string;
  principal: string;
  ttlSeconds: number;
  status: TicketStatus;
  /** When a WAITING ticket turns EXPIRED. */
  expiresAt: number;
  generation: number | null;
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
  queueMode: QueueMode;
  maxQueueLength: number;
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
  /** Every ticket, in the order they were enqueued (§17). */
  readonly tickets: ModelTicket[] = [];
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

  updatePolicy(
    name: string,
    rules: Rule[] | undefined,
    ttl: number | null | undefined,
    queue: { queueMode?: QueueMode; maxQueueLength?: number } = {},
  ): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    if (rules) env.rules = rules.map((rule) => ({ ...rule }));
    if (ttl !== undefined) env.proposalTtlSeconds = ttl;
    if (queue.queueMode) env.queueMode = queue.queueMode;
    if (queue.maxQueueLength) env.maxQueueLength = queue.maxQueueLength;
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

  /** R39: what a read shows; a WAITING ticket reads EXPIRED from its expiresAt. */
  ticketStatus(ticket: ModelTicket): TicketStatus {
    return ticket.status === 'WAITING' && ticket.expiresAt <= this.now ? 'EXPIRED' : ticket.status;
  }

  /** The tickets that wait in the environment's queue now, head first. */
  waiting(name: string): ModelTicket[] {
    return this.tickets.filter((t) => t.environment === name && this.ticketStatus(t) === 'WAITING');
  }

  /** 1-based place of a WAITING ticket, else null. */
  position(ticket: ModelTicket): number | null {
    const index = this.waiting(ticket.environment).indexOf(ticket);
    return index < 0 ? null : index + 1;
  }

  /**
   * R37, R39: what every lease-side write first does, and the sweeper: expired tickets are
   * stored EXPIRED, and a free environment is granted to the head ticket.
   */
  private handOff(env: ModelEnvironment): void {
    for (const ticket of this.tickets)
      if (ticket.environment === env.name) ticket.status = this.ticketStatus(ticket);
    this.grantHead(env);
  }

  private grantHead(env: ModelEnvironment): void {
    const head = this.waiting(env.name)[0];
    if (!head || this.liveLease(env) || this.exhausted(env)) return;
    head.status = 'GRANTED';
    head.generation = this.grant(env, head.principal, head.ttlSeconds);
    this.announce(env.name, 'lease.granted');
  }

  /** R1: the environment has issued the largest generation a client can hold. */
  private exhausted(env: ModelEnvironment): boolean {
    return env.lastIssued >= LAST_GENERATION;
  }

  /** R1, R3: a new generation; STRICT raises the fence to it. */
  private grant(env: ModelEnvironment, principal: string, ttlSeconds: number): number {
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
    return generation;
  }

  /** §17: the outcome code (OK with the new ticket's status); the ticket is the model's last one. */
  enqueue(principal: string, name: string, ttlSeconds: number, maxWaitSeconds: number): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    this.handOff(env);
    if (this.exhausted(env)) return 'GENERATIONS_EXHAUSTED';
    if (env.queueMode === 'LATEST') {
      for (const ticket of this.waiting(name)) {
        ticket.status = 'SUPERSEDED';
        this.announce(name, 'lease.superseded');
      }
    }
    if (this.waiting(name).length >= env.maxQueueLength) return 'QUEUE_FULL';
    const ticket: ModelTicket = {
      index: this.tickets.length,
      environment: name,
      principal,
      ttlSeconds,
      status: 'WAITING',
      expiresAt: this.now + maxWaitSeconds * 1000,
      generation: null,
    };
    this.tickets.push(ticket);
    this.grantHead(env);
    return `OK:${ticket.status}`;
  }

  /** R39: by its owner or an ADMIN; a ticket no longer WAITING stays as it is. */
  cancel(principal: string, role: Role, index: number): string {
    this.expire();
    const ticket = this.tickets[index];
    if (!ticket) return 'NOT_FOUND';
    if (role !== 'ADMIN' && ticket.principal !== principal) return 'FORBIDDEN';
    this.handOff(this.environments.get(ticket.environment)!);
    if (ticket.status === 'WAITING') ticket.status = 'CANCELLED';
    return `OK:${ticket.status}`;
  }

  /** R37: the sweeper hands off every queue whose head could be granted or whose tickets expired. */
  sweep(): void {
    // A plan whose proposal TTL ran out before the sweep is EXPIRED; a grant cannot make it OBSOLETE.
    this.expire();
    for (const env of this.environments.values()) {
      const stored = this.tickets.filter(
        (t) => t.environment === env.name && t.status === 'WAITING',
      );
      if (stored.some((t) => t.expiresAt <= this.now) || (stored.length && !this.liveLease(env)))
        this.handOff(env);
    }
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
      queueMode: 'FIFO',
      maxQueueLength: 20,
    });
    return 'OK';
  }

  acquire(principal: string, name: string, ttlSeconds: number): string {
    this.expire();
    const env = this.environments.get(name);
    if (!env) return 'NOT_FOUND';
    this.handOff(env);
    if (this.exhausted(env)) return 'GENERATIONS_EXHAUSTED';
    // R38: no queue jumping.
    if (this.waiting(name).length) return 'LEASE_HELD';
    const live = this.liveLease(env);
    if (live && live.holder !== principal) return 'LEASE_HELD';
    this.grant(env, principal, ttlSeconds);
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
    if (typeof env === 'string') {
      // The caller's lease is over: the queue is handed the environment (R37).
      const found = this.environments.get(name);
      if (found) this.handOff(found);
      return env;
    }
    env.lease!.expiresAt = this.now + ttlSeconds * 1000;
    return 'OK';
  }

  release(principal: string, name: string, generation: number): string {
    const env = this.leaseCheck(principal, name, generation);
    if (typeof env !== 'string') env.lease = null;
    // R37: granted in the transaction that frees the environment (or finds it free).
    const found = this.environments.get(name);
    if (found) this.handOff(found);
    return typeof env === 'string' ? env : 'OK';
  }

  /**
   * R9 around R3–R5: the outcome code, and the plan id when accepted. PRECONDITION_FAILED
   * names its reason (§6): `PRECONDITION_FAILED:CURRENT_PLAN`.
   */
  submit(principal: string, input: SubmitInput): Outcome {
    // R7: a plan of another environment could never be this one's current plan; refused
    // as bad input before anything else, nothing remembered under the key.
    const based = input.basedOnPlanId;
    if (based != null && based.slice(0, based.lastIndexOf('@')) !== input.environment)
      return { code: 'BAD_USER_INPUT' };
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
      return { code: 'PRECONDITION_FAILED:CURRENT_PLAN' };
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
   * the plan has after the approval (PROPOSED: recorded, not yet publishing), PRECONDITION_FAILED
   * with its reason (§6): CONTENT_HASH (R13) or CURRENT_PLAN (R7).
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
    if (contentHash != null && contentHash !== plan.contentHash)
      return 'PRECONDITION_FAILED:CONTENT_HASH';
    if (plan.generation < env.fence) return 'STALE_GENERATION';
    if (plan.status !== 'PROPOSED') return `INVALID_PLAN_STATE:${plan.status}`;
    if (plan.approvals.some((a) => a.approver === reviewer)) return 'ALREADY_APPROVED';
    if (env.current && !after(plan, env.current)) return 'INVALID_PLAN_STATE:OBSOLETE';
    const approvers = [...plan.approvals.map((a) => a.approver), reviewer];
    const completes = breakGlassReason != null || this.unmet(env, plan, approvers).length === 0;
    if (completes) {
      if (breakGlassReason == null && env.frozen) return 'FROZEN';
      if (plan.basedOnPlanId != null && env.current?.id !== plan.basedOnPlanId)
        return 'PRECONDITION_FAILED:CURRENT_PLAN';
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
