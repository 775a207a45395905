import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { execute, RetryTransaction, select, updateReturning } from '../database/database.js';
import { Environment, FencingMode, QueueMode } from '../environments/environment.entity.js';
import { EnvironmentError } from '../environments/environment.errors.js';
import { LeaseGrant } from '../leases/lease-grant.entity.js';
import { LeaseTicket } from '../leases/lease-ticket.entity.js';
import { QueueError } from '../leases/lease-queue.errors.js';
import { Lease } from '../leases/lease.model.js';
import { Plan, type PlanContentType, PlanStatus } from '../plans/plan.entity.js';
import { FenceError, PolicyVersionChanged } from './fence.errors.js';
import { exists, findOne, findOneOrFail, insertRow } from '../database/rows.js';
import type { ApprovalRule } from '../environments/policy.model.js';
import { APPROVALS_OF_RULE, snapshotOf } from '../plans/approvals.js';
import { PlanId } from '../common/ids.js';
import type { PlanPolicy } from '../policies/plan-policy.model.js';
import type { PolicyDecision } from '../policies/policy-decision.js';
import { PolicyError } from '../policies/policy.errors.js';
import { addEffect } from './effects.js';

/** The live lease of an environment row at `now`, or null. */
export function liveLease(env: Environment, now: number): Lease | null {
  // Stryker disable next-line ConditionalExpression,LogicalOperator: holder and expiry are set and cleared together; either null check alone decides the same.
  if (env.leaseHolder == null || env.leaseExpiresAt == null || env.leaseExpiresAt <= now)
    return null;
  return {
    environment: env.name,
    holder: env.leaseHolder,
    generation: env.leaseGeneration ?? 0,
    acquiredAt: new Date(env.leaseAcquiredAt ?? 0),
    expiresAt: new Date(env.leaseExpiresAt),
  };
}

/**
 * The guard. Every statement that writes an environment's generation counter, lease,
 * fence or pointer, or a plan's row or status, is in this class, and each decision is
 * one conditional statement whose affected-row count decides (R2). When it affects
 * nothing, the rows are read only to name the rejection.
 *
 * Every method runs inside the caller's write transaction (`manager`), and throws a
 * rejection only before it has written anything but EXPIRED for proposals whose time has
 * come (R16), which holds whatever the decision.
 */
@Injectable()
export class FenceService {
  async createEnvironment(
    m: EntityManager,
    p: {
      name: string;
      mode: FencingMode;
      requireApproval: boolean;
      approvalRules: readonly ApprovalRule[];
      proposalTtlSeconds: number | null;
      now: number;
    },
  ): Promise<Environment> {
    if (await exists(m, Environment, { name: p.name })) {
      throw new EnvironmentError('ALREADY_EXISTS', `environment "${p.name}" already exists`);
    }
    await execute(
      m,
      `INSERT INTO environments (name, mode, require_approval, fence, last_issued_generation,
         current_generation, current_sequence, created_at, proposal_ttl_seconds)
       VALUES (:name, :mode, :requireApproval, 0, 0, 0, 0, :now, :proposalTtlSeconds)`,
      p,
    );
    await this.replaceRules(m, p.name, p.approvalRules);
    return findOneOrFail(m, Environment, { name: p.name });
  }

  /**
   * R15, R16: new rules apply to every later decision; a new TTL to plans submitted from
   * now on (a plan's expiresAt is fixed when it is submitted). `undefined` leaves a part as
   * it is; a null TTL means proposals no longer expire. New plan policies (R34) replace the
   * old ones and bump the policy version in the same statement.
   */
  async updatePolicy(
    m: EntityManager,
    p: {
      environment: string;
      approvalRules?: readonly ApprovalRule[] | null;
      proposalTtlSeconds?: number | null;
      planPolicies?: readonly PlanPolicy[] | null;
      now: number;
    },
  ): Promise<Environment> {
    // The first statement takes the environment's row (PostgreSQL): decisions in flight finish first.
    const found = await execute(
      m,
      `UPDATE environments SET proposal_ttl_seconds = ${
        p.proposalTtlSeconds !== undefined ? ':ttl' : 'proposal_ttl_seconds'
      }${p.planPolicies ? ', policy_version = policy_version + 1' : ''} WHERE name = :environment`,
      { environment: p.environment, ttl: p.proposalTtlSeconds ?? null },
    );
    if (!found) throw EnvironmentError.notFound(p.environment);
    if (p.approvalRules) await this.replaceRules(m, p.environment, p.approvalRules);
    if (p.planPolicies) await this.replacePlanPolicies(m, p.environment, p.planPolicies);
    await this.expireProposals(m, p.now, p.environment);
    return this.environment(m, p.environment);
  }

  /** R17: while frozen, nothing is published but by an ADMIN's break-glass approval. Freezing again replaces the reason. */
  async freeze(
    m: EntityManager,
    p: { environment: string; reason: string; actor: string; now: number },
  ): Promise<Environment> {
    const frozen = await execute(
      m,
      `UPDATE environments SET frozen_reason = :reason, frozen_by = :actor, frozen_at = :now
       WHERE name = :environment`,
      p,
    );
    if (!frozen) throw EnvironmentError.notFound(p.environment);
    await this.expireProposals(m, p.now, p.environment);
    const env = await this.environment(m, p.environment);
    addEffect(m, {
      kind: 'outbox',
      subject: 'environment',
      type: 'environment.frozen',
      environment: env,
      actor: p.actor,
      at: p.now,
    });
    return env;
  }

  async unfreeze(
    m: EntityManager,
    p: { environment: string; actor: string; now: number },
  ): Promise<Environment> {
    const found = await execute(
      m,
      `UPDATE environments SET frozen_reason = NULL, frozen_by = NULL, frozen_at = NULL
       WHERE name = :environment`,
      p,
    );
    if (!found) throw EnvironmentError.notFound(p.environment);
    await this.expireProposals(m, p.now, p.environment);
    const env = await this.environment(m, p.environment);
    addEffect(m, {
      kind: 'outbox',
      subject: 'environment',
      type: 'environment.unfrozen',
      environment: env,
      actor: p.actor,
      at: p.now,
    });
    return env;
  }

  /**
   * R16: PROPOSED plans whose expiresAt has come (by the service clock) become EXPIRED, in
   * one environment or, for the retention job, in all of them. Reads show EXPIRED from that
   * instant already; this makes it the stored status, and announces each (plan.expired).
   */
  async expireProposals(m: EntityManager, now: number, environment?: string): Promise<number> {
    const expired = await updateReturning<{ id: string }>(
      m,
      `UPDATE plans SET status = 'EXPIRED'
       WHERE status = 'PROPOSED' AND expires_at <= :now
         ${environment !== undefined ? 'AND environment = :environment' : ''}
       RETURNING id`,
      { now, environment: environment ?? null },
    );
    // In id order: the order the outbox announces them in does not depend on the database's.
    for (const { id } of expired.sort((a, b) => (a.id < b.id ? -1 : 1))) {
      const plan = await this.plan(m, id);
      addEffect(m, {
        kind: 'outbox',
        subject: 'plan',
        type: 'plan.expired',
        plan,
        actor: 'planfence',
        at: now,
      });
    }
    return expired.length;
  }

  private async replaceRules(
    m: EntityManager,
    environment: string,
    rules: readonly ApprovalRule[],
  ): Promise<void> {
    await execute(m, 'DELETE FROM approval_rules WHERE environment = :environment', {
      environment,
    });
    for (const [position, rule] of rules.entries()) {
      await execute(
        m,
        `INSERT INTO approval_rules (environment, position, group_name, required_count)
         VALUES (:environment, :position, :group, :count)`,
        { environment, position, group: rule.group, count: rule.count },
      );
    }
  }

  private async replacePlanPolicies(
    m: EntityManager,
    environment: string,
    policies: readonly PlanPolicy[],
  ): Promise<void> {
    await execute(m, 'DELETE FROM plan_policies WHERE environment = :environment', {
      environment,
    });
    for (const [position, policy] of policies.entries()) {
      await execute(
        m,
        `INSERT INTO plan_policies (environment, position, name, expression, effect, message,
           group_name, required_count)
         VALUES (:environment, :position, :name, :expression, :effect, :message, :group, :count)`,
        { environment, position, ...policy },
      );
    }
  }

  /**
   * R1, R10: a new generation per grant; STRICT raises the fence to it in the same statement.
   * R38: refused while lease tickets wait, after the queue was handed the lease if it was free.
   */
  async grantLease(
    m: EntityManager,
    p: { environment: string; principal: string; holder: string; ttlMs: number; now: number },
  ): Promise<Lease> {
    await this.handOffLease(m, p.environment, p.now);
    const granted = await execute(
      m,
      `UPDATE environments SET
         last_issued_generation = last_issued_generation + 1,
         fence = CASE WHEN mode = 'STRICT' THEN last_issued_generation + 1 ELSE fence END,
         lease_generation = last_issued_generation + 1,
         lease_holder = :holder, lease_principal = :principal,
         lease_acquired_at = :now, lease_expires_at = :expiresAt
       WHERE name = :environment
         AND (lease_holder IS NULL OR lease_expires_at <= :now OR lease_holder = :holder)
         AND NOT EXISTS (${WAITING_TICKETS})`,
      { ...p, expiresAt: p.now + p.ttlMs },
    );
    const env = await this.environment(m, p.environment);
    if (!granted) {
      const lease = liveLease(env, p.now);
      const queueLength = await this.queueLength(m, env.name, p.now);
      throw new FenceError(
        'LEASE_HELD',
        `environment "${env.name}" is leased to ${lease?.holder}${queueLength ? ` and ${queueLength} lease tickets wait` : ''}`,
        {
          // Stryker disable next-line OptionalChaining: a refused grant means another holder's lease is live at this same instant (the queue is handed a free lease first), so lease is never null here.
          holder: lease?.holder ?? null,
          expiresAt: lease ? lease.expiresAt.toISOString() : null,
          ...(queueLength ? { queueLength } : {}),
        },
      );
    }
    await this.expireProposals(m, p.now, env.name);
    const generation = env.lastIssuedGeneration;
    await insertRow(m, LeaseGrant, {
      environment: env.name,
      generation,
      principal: p.principal,
      holder: p.holder,
      acquiredAt: p.now,
    });
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a MONOTONIC grant moves no fence, so marking there is a no-op.
    if (env.mode === FencingMode.STRICT) await this.markObsolete(m, env.name);
    return liveLease(env, p.now)!;
  }

  /** R10: keeps the generation; only the caller's own live lease can be renewed. */
  async renewLease(
    m: EntityManager,
    p: { environment: string; principal: string; generation: number; ttlMs: number; now: number },
  ): Promise<Lease> {
    const renewed = await execute(
      m,
      `UPDATE environments SET lease_expires_at = :expiresAt
       WHERE name = :environment AND ${LIVE_LEASE_OF_CALLER}`,
      { ...p, expiresAt: p.now + p.ttlMs },
    );
    if (!renewed) {
      // Named as things stood when the renewal was refused; then the caller's lease being
      // over, the queue is handed the environment (R37).
      const refused = await this.leaseNotHeld(m, p);
      await this.handOffLease(m, p.environment, p.now);
      throw refused;
    }
    await this.expireProposals(m, p.now, p.environment);
    return liveLease(await this.environment(m, p.environment), p.now)!;
  }

  async releaseLease(
    m: EntityManager,
    p: { environment: string; principal: string; generation: number; now: number },
  ): Promise<void> {
    const released = await execute(
      m,
      `UPDATE environments SET lease_holder = NULL, lease_principal = NULL, lease_generation = NULL,
         lease_acquired_at = NULL, lease_expires_at = NULL
       WHERE name = :environment AND ${LIVE_LEASE_OF_CALLER}`,
      p,
    );
    const refused = released ? null : await this.leaseNotHeld(m, p);
    // R37: the head ticket, if any, is granted in the transaction that frees the environment.
    await this.handOffLease(m, p.environment, p.now);
    if (refused) throw refused;
    await this.expireProposals(m, p.now, p.environment);
  }

  // The lease queue (DESIGN §17, R37–R39). Every writer of an environment's tickets first
  // takes the environment's row (handOffLease), so the tickets of one environment change one
  // transaction at a time, and ids grow in commit order.

  /**
   * Takes the environment's row, stores EXPIRED for WAITING tickets whose time has come
   * (R39), and, if the environment has no live lease, grants it to the head ticket (R37).
   * Holds whatever the caller then decides. Returns the ticket granted, if one was.
   */
  async handOffLease(
    m: EntityManager,
    environment: string,
    now: number,
  ): Promise<{ expired: number; granted: LeaseTicket | null }> {
    const found = await execute(
      m,
      'UPDATE environments SET fence = fence WHERE name = :environment',
      {
        environment,
      },
    );
    if (!found) throw EnvironmentError.notFound(environment);
    const expired = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE lease_tickets SET status = 'EXPIRED', ended_at = :now
       WHERE environment = :environment AND status = 'WAITING' AND expires_at <= :now
       RETURNING id`,
      { environment, now },
    );
    for (const { id } of expired) addEffect(m, { kind: 'leaseTicketChanged', id: Number(id) });
    return { expired: expired.length, granted: await this.grantHeadTicket(m, environment, now) };
  }

  /**
   * R37: one conditional statement grants the environment to the head ticket (the oldest
   * WAITING one not expired) only while no lease is live: a new generation, exactly as
   * acquireLease issues it (R1; STRICT raises the fence, R3), running the ticket's
   * ttlSeconds from now (R39). Once the lease is live, no second ticket can be granted it.
   */
  private async grantHeadTicket(
    m: EntityManager,
    environment: string,
    now: number,
  ): Promise<LeaseTicket | null> {
    const granted = await execute(
      m,
      `UPDATE environments SET
         last_issued_generation = last_issued_generation + 1,
         fence = CASE WHEN mode = 'STRICT' THEN last_issued_generation + 1 ELSE fence END,
         lease_generation = last_issued_generation + 1,
         lease_holder = (SELECT t.holder FROM lease_tickets t WHERE t.id = (${HEAD_TICKET})),
         lease_principal = (SELECT t.principal FROM lease_tickets t WHERE t.id = (${HEAD_TICKET})),
         lease_acquired_at = :now,
         lease_expires_at = CAST(:now AS BIGINT)
           + 1000 * (SELECT t.ttl_seconds FROM lease_tickets t WHERE t.id = (${HEAD_TICKET}))
       WHERE name = :environment
         AND (lease_holder IS NULL OR lease_expires_at <= :now)
         AND EXISTS (${WAITING_TICKETS})`,
      { environment, now },
    );
    if (!granted) return null;
    const env = await this.environment(m, environment);
    const generation = env.lastIssuedGeneration;
    const marked = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE lease_tickets SET status = 'GRANTED', granted_at = :now, ended_at = :now,
         generation = :generation
       WHERE status = 'WAITING' AND id = (${HEAD_TICKET})
       RETURNING id`,
      { environment, now, generation },
    );
    // The environment's row is held since handOffLease: the head cannot have changed.
    // Stryker disable next-line all: defence in depth.
    if (marked.length !== 1)
      throw new RetryTransaction(`the head ticket of ${environment} changed`);
    const ticket = await findOneOrFail(m, LeaseTicket, { id: Number(marked[0].id) });
    await insertRow(m, LeaseGrant, {
      environment,
      generation,
      principal: ticket.principal,
      holder: ticket.holder,
      acquiredAt: now,
    });
    await this.expireProposals(m, now, environment);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a MONOTONIC grant moves no fence, so marking there is a no-op.
    if (env.mode === FencingMode.STRICT) await this.markObsolete(m, environment);
    addEffect(m, {
      kind: 'outbox',
      subject: 'leaseTicket',
      type: 'lease.granted',
      ticket,
      actor: 'planfence',
      at: now,
    });
    addEffect(m, { kind: 'leaseTicketChanged', id: ticket.id });
    return ticket;
  }

  /**
   * A ticket for the environment's lease: granted at once when no lease is live and none
   * waits, else WAITING until maxWaitSeconds (R39). LATEST first supersedes every WAITING
   * ticket. QUEUE_FULL {max} when maxQueueLength tickets wait.
   */
  async enqueueLease(
    m: EntityManager,
    p: {
      environment: string;
      principal: string;
      holder: string;
      ttlSeconds: number;
      maxWaitSeconds: number;
      now: number;
    },
  ): Promise<LeaseTicket> {
    await this.handOffLease(m, p.environment, p.now);
    const superseded = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE lease_tickets SET status = 'SUPERSEDED', ended_at = :now
       WHERE environment = :environment AND status = 'WAITING'
         AND EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
                     AND e.queue_mode = '${QueueMode.LATEST}')
       RETURNING id`,
      p,
    );
    for (const { id } of superseded.sort((a, b) => Number(a.id) - Number(b.id))) {
      const ticket = await findOneOrFail(m, LeaseTicket, { id: Number(id) });
      addEffect(m, {
        kind: 'outbox',
        subject: 'leaseTicket',
        type: 'lease.superseded',
        ticket,
        actor: p.holder,
        at: p.now,
      });
      addEffect(m, { kind: 'leaseTicketChanged', id: ticket.id });
    }
    const [inserted] = await select<{ id: number | string }>(
      m,
      `INSERT INTO lease_tickets (environment, principal, holder, ttl_seconds, status,
         enqueued_at, expires_at)
       SELECT e.name, CAST(:principal AS VARCHAR(63)), CAST(:holder AS VARCHAR(320)),
         CAST(:ttlSeconds AS INTEGER), 'WAITING', CAST(:now AS BIGINT), CAST(:expiresAt AS BIGINT)
       FROM environments e
       WHERE e.name = :environment
         AND (SELECT COUNT(*) FROM lease_tickets t
              WHERE t.environment = :environment AND t.status = 'WAITING') < e.max_queue_length
       RETURNING id`,
      { ...p, expiresAt: p.now + p.maxWaitSeconds * 1000 },
    );
    if (!inserted) {
      const env = await this.environment(m, p.environment);
      throw new QueueError(
        'QUEUE_FULL',
        `${env.maxQueueLength} lease tickets already wait for environment "${env.name}"`,
        { max: env.maxQueueLength },
      );
    }
    await this.grantHeadTicket(m, p.environment, p.now);
    return findOneOrFail(m, LeaseTicket, { id: Number(inserted.id) });
  }

  /** R39: a WAITING ticket turns CANCELLED; any other is returned as it is. */
  async cancelLeaseTicket(m: EntityManager, p: { id: number; now: number }): Promise<LeaseTicket> {
    const ticket = await findOne(m, LeaseTicket, { id: p.id });
    if (!ticket) throw QueueError.ticketNotFound(p.id);
    await this.handOffLease(m, ticket.environment, p.now);
    const cancelled = await execute(
      m,
      `UPDATE lease_tickets SET status = 'CANCELLED', ended_at = :now
       WHERE id = :id AND status = 'WAITING'`,
      p,
    );
    if (cancelled) addEffect(m, { kind: 'leaseTicketChanged', id: p.id });
    return findOneOrFail(m, LeaseTicket, { id: p.id });
  }

  /** The queue settings of updateEnvironmentPolicy; `undefined` leaves one as it is. */
  async setQueuePolicy(
    m: EntityManager,
    p: { environment: string; queueMode?: QueueMode | null; maxQueueLength?: number | null },
  ): Promise<void> {
    const found = await execute(
      m,
      `UPDATE environments SET
         queue_mode = ${p.queueMode != null ? ':queueMode' : 'queue_mode'},
         max_queue_length = ${p.maxQueueLength != null ? ':maxQueueLength' : 'max_queue_length'}
       WHERE name = :environment`,
      {
        environment: p.environment,
        queueMode: p.queueMode ?? null,
        maxQueueLength: p.maxQueueLength ?? null,
      },
    );
    if (!found) throw EnvironmentError.notFound(p.environment);
  }

  /** WAITING tickets of the environment not expired at `now`. */
  private async queueLength(m: EntityManager, environment: string, now: number): Promise<number> {
    const [row] = await select<{ n: number | string }>(
      m,
      `SELECT COUNT(*) AS n FROM lease_tickets
       WHERE environment = :environment AND status = 'WAITING' AND expires_at > :now`,
      { environment, now },
    );
    return Number(row.n);
  }

  /**
   * R3, R4, R5: stores a plan made under `generation` if the fence admits it (MONOTONIC:
   * generation >= fence, raising the fence; STRICT: generation == fence and the caller's
   * lease of it is live). Where the environment needs no approval, the same statement
   * also demands `basedOnPlanId` be current, the environment's deployment sequence still
   * `basedOnDeploymentSequence` (R33) and the environment not frozen (R17), and the plan is
   * published in this transaction. A proposal gets its expiresAt from the environment's
   * proposalTtlSeconds (R16).
   *
   * R34, R35: `policy` was decided outside the transaction at policy version
   * `policy.version`; the same statement demands that version still be the environment's
   * (else PolicyVersionChanged: evaluate again). A denial writes nothing (POLICY_DENIED,
   * after a statement that makes the same demand). Rules the plan's policies add are stored
   * with it, and a plan that needs approvals is never published by its submit.
   */
  async admitPlan(
    m: EntityManager,
    p: {
      environment: string;
      principal: string;
      generation: number;
      content: string;
      contentHash: string;
      title: string | null;
      basedOnPlanId: string | null;
      contentType: PlanContentType;
      /** JSON of the summary the service computed. */
      summary: string | null;
      artifact: string | null;
      artifactHash: string | null;
      basedOnDeploymentSequence: number | null;
      sourceRevision: string | null;
      policy: PolicyDecision;
      now: number;
    },
  ): Promise<Plan> {
    const before = await this.environment(m, p.environment);
    const params = { ...p, policyVersion: p.policy.version };
    if (p.policy.denial) {
      const current = await execute(
        m,
        `UPDATE environments SET fence = fence
         WHERE name = :environment AND policy_version = :policyVersion`,
        params,
      );
      if (!current) throw new PolicyVersionChanged(p.environment);
      throw PolicyError.denied(p.policy.denial.policy, p.policy.denial.message);
    }
    const publish = !before.requireApproval && p.policy.rules.length === 0;
    const casOnPointer = publish && p.basedOnPlanId != null;
    const casOnSequence = publish && p.basedOnDeploymentSequence != null;
    const admitted = await execute(
      m,
      `UPDATE environments SET fence = :generation
       WHERE name = :environment AND policy_version = :policyVersion
         AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = :environment
                     AND g.generation = :generation AND g.principal = :principal)
         AND ((mode = 'MONOTONIC' AND fence <= :generation)
           OR (mode = 'STRICT' AND fence = :generation AND lease_generation = :generation
               AND lease_principal = :principal AND lease_expires_at > :now))
         ${casOnPointer ? 'AND current_plan_id = :basedOnPlanId' : ''}
         ${casOnSequence ? 'AND deployment_sequence = :basedOnDeploymentSequence' : ''}
         ${publish ? 'AND frozen_at IS NULL' : ''}`,
      params,
    );
    if (!admitted) {
      throw await this.whySubmitRejected(m, params, publish, casOnPointer, casOnSequence);
    }
    await this.expireProposals(m, p.now, p.environment);

    const [{ next }] = await select<{ next: number | string }>(
      m,
      `SELECT COALESCE(MAX(sequence), 0) + 1 AS next FROM plans
       WHERE environment = :environment AND generation = :generation`,
      p,
    );
    const sequence = Number(next);
    const id = PlanId.format(p.environment, p.generation, sequence);
    const at = new Date(p.now);
    await insertRow(m, Plan, {
      id,
      environment: p.environment,
      generation: p.generation,
      sequence,
      status: publish ? PlanStatus.PUBLISHED : PlanStatus.PROPOSED,
      title: p.title,
      content: p.content,
      contentHash: p.contentHash,
      contentType: p.contentType,
      summary: p.summary,
      artifact: p.artifact,
      artifactHash: p.artifactHash,
      basedOnDeploymentSequence: p.basedOnDeploymentSequence,
      sourceRevision: p.sourceRevision,
      submittedBy: p.principal,
      submittedAt: at,
      basedOnPlanId: p.basedOnPlanId,
      reviewedBy: null,
      reviewedAt: null,
      rejectionReason: null,
      publishedAt: publish ? at : null,
      purgedAt: null,
      expiresAt:
        !publish && before.proposalTtlSeconds != null
          ? new Date(p.now + before.proposalTtlSeconds * 1000)
          : null,
      policyVersion: p.policy.version,
      policyResults: p.policy.results,
    });
    for (const [position, rule] of p.policy.rules.entries()) {
      await execute(
        m,
        `INSERT INTO plan_approval_rules (plan_id, position, group_name, required_count)
         VALUES (:id, :position, :group, :count)`,
        { id, position, group: rule.group, count: rule.count },
      );
    }
    if (publish) {
      const moved = await execute(
        m,
        `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
           current_sequence = :sequence
         WHERE name = :environment AND ${POINTER_MOVES_FORWARD}`,
        { id, environment: p.environment, generation: p.generation, sequence },
      );
      // Admission above already implies this; a failure here is a broken invariant, not a rejection.
      // Stryker disable all: unreachable while the admission statement holds the environment row.
      if (moved !== 1)
        throw new Error(`pointer of ${p.environment} would not move forward to ${id}`);
      // Stryker restore all
      await this.afterPublication(m, p.environment, id);
    } else {
      await this.markObsolete(m, p.environment);
    }
    const plan = await findOneOrFail(m, Plan, { id });
    addEffect(m, {
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.submitted',
      plan,
      actor: p.principal,
      at: p.now,
    });
    if (publish) {
      addEffect(m, {
        kind: 'outbox',
        subject: 'plan',
        type: 'plan.published',
        plan,
        actor: p.principal,
        at: p.now,
      });
      addEffect(m, { kind: 'planPublished', plan });
    }
    return plan;
  }

  /**
   * R5–R7, R13–R17: records the reviewer's approval of the plan and, when it completes the
   * environment's approval rules (or is an ADMIN's break-glass approval), publishes the plan
   * in the same transaction. Earlier approvals leave the plan PROPOSED.
   *
   * Three statements decide, after the first takes the environment's row (on PostgreSQL;
   * SQLite runs one write at a time), so that approvals of one environment are decided one
   * after another and each sees the approvals committed before it:
   * 1. the approval row is inserted only if the plan is approvable now (PROPOSED, not expired,
   *    of the fence's generation, after the current plan, not the reviewer's own, the pinned
   *    hash, not yet approved by the reviewer) and, if with this approval every rule would be
   *    met, only if the plan may also be published now (not frozen, basedOnPlanId current,
   *    the deployment sequence still basedOnDeploymentSequence: R33);
   * 2. the pointer moves only if, besides R5–R7 and R33, the approvals recorded for the plan meet
   *    every rule and the environment is not frozen (a break-glass approval: only R5–R7);
   * 3. the plan is marked PUBLISHED.
   * When (2) moves nothing, the approval was not the completing one.
   */
  async publishPlan(
    m: EntityManager,
    p: {
      planId: string;
      reviewer: string;
      contentHash: string | null;
      breakGlassReason: string | null;
      now: number;
    },
  ): Promise<Plan> {
    const plan = await this.plan(m, p.planId);
    const breakGlass = p.breakGlassReason != null;
    const params = {
      ...p,
      id: plan.id,
      environment: plan.environment,
      generation: plan.generation,
      sequence: plan.sequence,
      basedOnPlanId: plan.basedOnPlanId,
      basedOnDeploymentSequence: plan.basedOnDeploymentSequence,
      submitter: plan.submittedBy,
    };
    await execute(m, 'UPDATE environments SET fence = fence WHERE name = :environment', params);
    await this.expireProposals(m, p.now, plan.environment);
    // R7 and R33: the compare-and-swaps publication demands, on the pointer and on the
    // deployment sequence the plan was made against.
    const cas = [
      plan.basedOnPlanId != null ? 'e.current_plan_id = :basedOnPlanId' : '1 = 1',
      plan.basedOnDeploymentSequence != null
        ? 'e.deployment_sequence = :basedOnDeploymentSequence'
        : '1 = 1',
    ].join(' AND ');
    const approved = await execute(
      m,
      `INSERT INTO approvals (plan_id, approver, at, content_hash, break_glass_reason)
       SELECT p.id, CAST(:reviewer AS VARCHAR(63)), CAST(:now AS BIGINT), p.content_hash,
         CAST(:breakGlassReason AS VARCHAR(255))
       FROM plans p JOIN environments e ON e.name = p.environment
       WHERE p.id = :id AND p.status = 'PROPOSED' AND p.purged_at IS NULL
         AND p.submitted_by <> :reviewer
         AND (p.expires_at IS NULL OR p.expires_at > :now)
         AND p.generation = e.fence
         AND (e.current_generation < p.generation
           OR (e.current_generation = p.generation AND e.current_sequence < p.sequence))
         ${p.contentHash != null ? 'AND p.content_hash = :contentHash' : ''}
         AND NOT EXISTS (SELECT 1 FROM approvals mine WHERE mine.plan_id = :id AND mine.approver = :reviewer)
         AND ${breakGlass ? cas : `(${RULE_SHORT_EVEN_WITH_REVIEWER} OR (e.frozen_at IS NULL AND ${cas}))`}`,
      params,
    );
    if (!approved) throw await this.whyApprovalRejected(m, plan, p);
    const published = await execute(
      m,
      `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
         current_sequence = :sequence
       WHERE name = :environment AND fence = :generation AND ${POINTER_MOVES_FORWARD}
         ${plan.basedOnPlanId != null ? 'AND current_plan_id = :basedOnPlanId' : ''}
         ${plan.basedOnDeploymentSequence != null ? 'AND deployment_sequence = :basedOnDeploymentSequence' : ''}
         ${breakGlass ? '' : `AND frozen_at IS NULL AND ${RULES_MET}`}
         AND EXISTS (SELECT 1 FROM approvals a WHERE a.plan_id = :id AND a.approver = :reviewer
                     ${breakGlass ? 'AND a.break_glass_reason IS NOT NULL' : ''})
         AND EXISTS (SELECT 1 FROM plans p WHERE p.id = :id AND p.status = 'PROPOSED'
                     AND p.purged_at IS NULL AND p.submitted_by <> :reviewer
                     AND (p.expires_at IS NULL OR p.expires_at > :now)
                     ${p.contentHash != null ? 'AND p.content_hash = :contentHash' : ''})`,
      params,
    );
    if (!published) {
      const proposed = await this.plan(m, plan.id);
      proposed.snapshot = await snapshotOf(m, proposed);
      return proposed;
    }
    const marked = await execute(
      m,
      `UPDATE plans SET status = 'PUBLISHED', reviewed_by = :reviewer, reviewed_at = :now,
         published_at = :now
       WHERE id = :id AND status = 'PROPOSED'`,
      params,
    );
    // Another transaction changed the plan after our pointer statement read it: run again.
    // Stryker disable next-line all: only a concurrent reject on PostgreSQL gets here; SQLite runs transactions one at a time.
    if (marked !== 1) throw new RetryTransaction(`plan ${plan.id} changed status during approval`);
    await this.afterPublication(m, plan.environment, plan.id);
    const publishedPlan = await findOneOrFail(m, Plan, { id: plan.id });
    publishedPlan.snapshot = await snapshotOf(m, publishedPlan);
    addEffect(m, {
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.published',
      plan: publishedPlan,
      actor: p.reviewer,
      at: p.now,
    });
    addEffect(m, { kind: 'planPublished', plan: publishedPlan });
    return publishedPlan;
  }

  async rejectPlan(
    m: EntityManager,
    p: { planId: string; reviewer: string; reason: string; now: number },
  ): Promise<Plan> {
    const { environment } = await this.plan(m, p.planId);
    // Takes the environment's row first (PostgreSQL), as every decision that announces an event does.
    await execute(m, 'UPDATE environments SET fence = fence WHERE name = :environment', {
      environment,
    });
    await this.expireProposals(m, p.now, environment);
    const rejected = await execute(
      m,
      `UPDATE plans SET status = 'REJECTED', reviewed_by = :reviewer, reviewed_at = :now,
         rejection_reason = :reason
       WHERE id = :planId AND status = 'PROPOSED'`,
      p,
    );
    const plan = await this.plan(m, p.planId);
    if (!rejected) {
      throw new FenceError(
        'INVALID_PLAN_STATE',
        `plan ${plan.id} is ${plan.status}, not PROPOSED`,
        {
          status: plan.status,
        },
      );
    }
    addEffect(m, {
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.rejected',
      plan,
      actor: p.reviewer,
      at: p.now,
    });
    return plan;
  }

  /** R8: the previously published plan reads SUPERSEDED; proposals passed over read OBSOLETE. */
  private async afterPublication(m: EntityManager, environment: string, id: string): Promise<void> {
    await execute(
      m,
      `UPDATE plans SET status = 'SUPERSEDED'
       WHERE environment = :environment AND status = 'PUBLISHED' AND id <> :id`,
      { environment, id },
    );
    await this.markObsolete(m, environment);
  }

  /** R8: a proposal below the fence or older than the current plan can never be published. */
  private async markObsolete(m: EntityManager, environment: string): Promise<void> {
    await execute(
      m,
      `UPDATE plans SET status = 'OBSOLETE'
       WHERE environment = :environment AND status = 'PROPOSED'
         AND EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
           AND (plans.generation < e.fence OR plans.generation < e.current_generation
             OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)))`,
      { environment },
    );
  }

  private async environment(m: EntityManager, name: string): Promise<Environment> {
    const env = await findOne(m, Environment, { name });
    if (!env) throw EnvironmentError.notFound(name);
    return env;
  }

  private async plan(m: EntityManager, id: string): Promise<Plan> {
    const plan = await findOne(m, Plan, { id });
    if (!plan) throw new FenceError('NOT_FOUND', `plan ${id} does not exist`);
    return plan;
  }

  /** R4: a generation never issued, or issued to someone else, is not a token the caller holds. */
  private async unknownGeneration(
    m: EntityManager,
    p: { environment: string; principal: string; generation: number },
  ): Promise<FenceError | null> {
    const grant = await findOne(m, LeaseGrant, {
      environment: p.environment,
      generation: p.generation,
    });
    if (grant && grant.principal === p.principal) return null;
    return new FenceError(
      'UNKNOWN_GENERATION',
      `generation ${p.generation} of environment "${p.environment}" was not issued to ${p.principal}`,
    );
  }

  private async leaseNotHeld(
    m: EntityManager,
    p: { environment: string; principal: string; generation: number },
  ): Promise<FenceError> {
    await this.environment(m, p.environment);
    return (
      (await this.unknownGeneration(m, p)) ??
      new FenceError(
        'LEASE_NOT_HELD',
        `the lease of generation ${p.generation} on "${p.environment}" has expired, was released or was superseded`,
      )
    );
  }

  private stale(generation: number, fence: number, what: string): FenceError {
    return new FenceError(
      'STALE_GENERATION',
      `${what} generation ${generation} is below the fence ${fence}`,
      { generation, fence },
    );
  }

  private preconditionFailed(message: string, env: Environment): FenceError {
    return new FenceError('PRECONDITION_FAILED', message, { currentPlanId: env.currentPlanId });
  }

  /** R33: a deployment started after the plan was made; it describes a state that is gone. */
  private sequenceMoved(what: string, basedOn: number, env: Environment): FenceError {
    return new FenceError(
      'PRECONDITION_FAILED',
      `${what} was made against deployment sequence ${basedOn} of "${env.name}", which has moved on to ${env.deploymentSequence}: plan again`,
      { currentPlanId: env.currentPlanId, deploymentSequence: env.deploymentSequence },
    );
  }

  private async whySubmitRejected(
    m: EntityManager,
    p: {
      environment: string;
      principal: string;
      generation: number;
      basedOnPlanId: string | null;
      basedOnDeploymentSequence: number | null;
      policyVersion: number;
      now: number;
    },
    publish: boolean,
    casOnPointer: boolean,
    casOnSequence: boolean,
  ): Promise<Error> {
    const env = await this.environment(m, p.environment);
    if (env.policyVersion !== p.policyVersion) return new PolicyVersionChanged(env.name);
    const unknown = await this.unknownGeneration(m, p);
    if (unknown) return unknown;
    if (p.generation < env.fence) return this.stale(p.generation, env.fence, "the plan's");
    const lease = liveLease(env, p.now);
    // Stryker disable next-line ConditionalExpression: the generation was issued to the caller (checked above), so the lease of that generation is the caller's.
    const holdsLiveLease = lease?.generation === p.generation && env.leasePrincipal === p.principal;
    if (env.mode === FencingMode.STRICT && !holdsLiveLease) {
      return new FenceError(
        'LEASE_NOT_HELD',
        `STRICT environment "${env.name}" accepts generation ${p.generation} only under its live lease`,
      );
    }
    if (publish && env.frozenAt) return this.frozen(env);
    if (casOnPointer && env.currentPlanId !== p.basedOnPlanId) {
      return this.preconditionFailed(`the current plan is no longer ${p.basedOnPlanId}`, env);
    }
    // Stryker disable all: the deployment sequence is the only clause of the admission statement left, so
    // this condition holds whenever it is reached, and the last return is unreachable.
    if (casOnSequence && env.deploymentSequence !== p.basedOnDeploymentSequence) {
      return this.sequenceMoved(`the plan`, p.basedOnDeploymentSequence!, env);
    }
    return new Error(
      `submit to ${p.environment} at generation ${p.generation} rejected for no known reason`,
    );
    // Stryker restore all
  }

  private frozen(env: Environment): FenceError {
    return new FenceError(
      'FROZEN',
      `environment "${env.name}" is frozen by ${env.frozenBy}: ${env.frozenReason}`,
      { reason: env.frozenReason, frozenBy: env.frozenBy },
    );
  }

  /** Names the rejection of an approval whose row was not inserted, in the order docs/design.md §3/§9 give. */
  private async whyApprovalRejected(
    m: EntityManager,
    submitted: Plan,
    p: { reviewer: string; contentHash: string | null; breakGlassReason: string | null },
  ): Promise<Error> {
    const env = await this.environment(m, submitted.environment);
    // Re-read: expiry may have been materialised in this transaction.
    const plan = await this.plan(m, submitted.id);
    if (plan.submittedBy === p.reviewer) {
      return new FenceError(
        'SELF_APPROVAL',
        `${p.reviewer} submitted ${plan.id} and cannot also approve it`,
      );
    }
    if (p.contentHash != null && p.contentHash !== plan.contentHash) {
      return this.preconditionFailed(
        `plan ${plan.id} does not have the content hash that was reviewed`,
        env,
      );
    }
    if (plan.generation < env.fence)
      return this.stale(plan.generation, env.fence, `plan ${plan.id}'s`);
    if (plan.status !== PlanStatus.PROPOSED) {
      return new FenceError(
        'INVALID_PLAN_STATE',
        `plan ${plan.id} is ${plan.status}, not PROPOSED`,
        {
          status: plan.status,
        },
      );
    }
    if (plan.purgedAt != null) {
      return new FenceError(
        'INVALID_PLAN_STATE',
        `plan ${plan.id} waited past the retention period and its content was purged; submit it again`,
        { status: plan.status },
      );
    }
    const mine = await select(
      m,
      'SELECT 1 AS found FROM approvals WHERE plan_id = :id AND approver = :reviewer',
      { id: plan.id, reviewer: p.reviewer },
    );
    if (mine.length) {
      return new FenceError('ALREADY_APPROVED', `${p.reviewer} has already approved ${plan.id}`);
    }
    // Stryker disable all: a PROPOSED plan older than the current one was already marked OBSOLETE in the pointer's
    // transaction, so this branch and the last return are defence in depth, unreachable from the API.
    if (
      env.currentGeneration > plan.generation ||
      (env.currentGeneration === plan.generation && env.currentSequence >= plan.sequence)
    ) {
      return new FenceError(
        'INVALID_PLAN_STATE',
        `plan ${plan.id} is older than the current plan`,
        {
          status: PlanStatus.OBSOLETE,
        },
      );
    }
    // Stryker restore all
    // What is left of the approval statement: this approval would complete the rules (or is
    // break-glass), so publication must be possible now.
    if (p.breakGlassReason == null && env.frozenAt) return this.frozen(env);
    if (plan.basedOnPlanId != null && env.currentPlanId !== plan.basedOnPlanId) {
      return this.preconditionFailed(
        `plan ${plan.id} was based on ${plan.basedOnPlanId}, which is no longer current`,
        env,
      );
    }
    // Stryker disable all: the deployment sequence is the only clause left, so this condition holds
    // whenever it is reached, and the last return is unreachable.
    if (
      plan.basedOnDeploymentSequence != null &&
      env.deploymentSequence !== plan.basedOnDeploymentSequence
    ) {
      // Stryker restore all
      return this.sequenceMoved(`plan ${plan.id}`, plan.basedOnDeploymentSequence, env);
    }
    // Stryker disable next-line all: unreachable, as above.
    return new Error(`approval of ${plan.id} rejected for no known reason`);
  }
}

/** The WAITING tickets of :environment not expired at :now. */
const WAITING_TICKETS = `SELECT 1 FROM lease_tickets w WHERE w.environment = :environment
  AND w.status = 'WAITING' AND w.expires_at > :now`;

/** The id of the head of :environment's queue at :now: its oldest WAITING ticket not expired. */
const HEAD_TICKET = `SELECT MIN(h.id) FROM lease_tickets h WHERE h.environment = :environment
  AND h.status = 'WAITING' AND h.expires_at > :now`;

/** The caller's own lease of :generation is the environment's live lease at :now. */
const LIVE_LEASE_OF_CALLER = `lease_holder IS NOT NULL AND lease_generation = :generation
  AND lease_principal = :principal AND lease_expires_at > :now`;

/** R6: (generation, sequence) strictly after the current plan's. */
const POINTER_MOVES_FORWARD = `(current_generation < :generation
  OR (current_generation = :generation AND current_sequence < :sequence))`;

/** 1 when :reviewer would count toward rule `r`, else 0. */
const REVIEWER_IN_RULE = `(CASE WHEN r.group_name IS NULL OR EXISTS (SELECT 1 FROM principal_groups g
  WHERE g.principal = :reviewer AND g.group_name = r.group_name) THEN 1 ELSE 0 END)`;

/**
 * R14, R35: every rule of :environment, and every rule plan :id's policies added, is met by
 * the approvals recorded for the plan.
 */
const RULES_MET = `NOT EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = :environment
  AND ${APPROVALS_OF_RULE} < r.required_count)
  AND NOT EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = :id
  AND ${APPROVALS_OF_RULE} < r.required_count)`;

/** Some rule of :environment or of plan :id stays unmet even with :reviewer's approval added: it would not complete them. */
const RULE_SHORT_EVEN_WITH_REVIEWER = `(EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = :environment
  AND ${APPROVALS_OF_RULE} + ${REVIEWER_IN_RULE} < r.required_count)
  OR EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = :id
  AND ${APPROVALS_OF_RULE} + ${REVIEWER_IN_RULE} < r.required_count))`;
