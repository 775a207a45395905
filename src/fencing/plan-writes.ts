import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { changedOrRetry, execute, select, selectLater } from '../database/database.js';
import { drawId, insertReturning, updateEntities } from '../database/rows.js';
import { AuditEvent, AuditOutcome } from '../model/audit-event.entity.js';
import { noteEnvironmentRowHeld, takeEnvironmentRow } from './row-locks.js';
import { PlanId } from '../common/ids.js';
import { Plan, PLAN_LARGE_FIELDS, type PlanContentType, PlanStatus } from '../model/plan.entity.js';
import type { PolicyDecision } from '../policies/policy-decision.js';
import { PolicyError } from '../model/policy.errors.js';
import type { DecisionTx } from './effects.js';
import { FenceError, PolicyVersionChanged } from './fence.errors.js';
import {
  afterPublication,
  announceExpired,
  expireProposals,
  expiringProposals,
  IS_CURRENT,
  markObsolete,
} from './plan-status.js';
import { readEnvironment, readPlan } from './reads.js';
import { whyApprovalRejected, whyNotPublishable, whySubmitRejected } from './rejections.js';
import {
  CHECKS_MET,
  checksMetWithReport,
  PLAN_RULES_MET,
  POINTER_MOVES_FORWARD,
  promotionMet,
  REVISION_OF_PLAN,
  RULE_SHORT_EVEN_WITH_REVIEWER,
  RULES_MET,
  admissionStatement,
  NEXT_SEQUENCE,
  stateNotOlder,
} from './sql.js';
import { pendingChecksOf, readPreconditions } from './preconditions.js';
import { SUBMIT_ON_THREAD, type SubmitOnThread } from './submit-on-thread.js';
import type { Database } from '../database/database.js';

/** A plan's large fields are stored as given: its insert does not read them back. */
const LARGE_FIELDS = Object.keys(PLAN_LARGE_FIELDS) as (keyof typeof PLAN_LARGE_FIELDS)[];

/**
 * The guard's plan writes: every statement that stores a plan, records an approval, moves
 * an environment's pointer or sets a plan's status by a decision (R3–R8, R13–R17, R33–R35).
 * Each decision is one conditional statement whose affected-row count decides (R2); when
 * it affects nothing, the rows are read only to name the rejection (rejections.ts). Each
 * runs inside the caller's write transaction (`m`) and throws a rejection only before it
 * has written anything but EXPIRED for proposals whose time has come (R16).
 */
@Injectable()
export class PlanWrites {
  /** R16, for the retention job: every environment's proposals whose time has come. */
  expireProposals(tx: DecisionTx, now: number): Promise<number> {
    return expireProposals(tx, now);
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
   *
   * On PostgreSQL the common submit is decided by `planfence_submit_plan_at_once` first
   * (submitAtOnce): a change to these statements is a change to that function too (a new
   * migration); the model test holds both databases to one decision table.
   */
  async admitPlan(tx: DecisionTx, p: Submit & { now: number }): Promise<Plan> {
    const m = tx.manager;
    const before = await readEnvironment(m, p.environment);
    const params = {
      ...p,
      policyVersion: p.policy.version,
      priorLineage: p.priorState?.lineage ?? null,
      priorSerial: p.priorState?.serial ?? null,
    };
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
    // R50, R51: the environment's preconditions at the policy version the statement below
    // demands (their changes bump it), read in one statement.
    const preconditions = await readPreconditions(m, p.environment);
    if (preconditions.policyVersion !== p.policy.version) {
      throw new PolicyVersionChanged(p.environment);
    }
    // R50: a plan with required checks waits for their results; its submit never publishes.
    const publish =
      !before.requireApproval &&
      p.policy.rules.length === 0 &&
      preconditions.requiredChecks.length === 0;
    const casOnPointer = publish && p.basedOnPlanId != null;
    // R57: a plan made against a deployment sequence or a Terraform state that has already
    // moved on is refused at submit, whether or not it would be published now.
    const casOnSequence = p.basedOnDeploymentSequence != null;
    const casOnState = p.priorState != null;
    const admitted = await execute(
      m,
      admissionStatement({ publish, casOnPointer, casOnSequence, casOnState }),
      params,
    );
    if (!admitted) {
      throw await whySubmitRejected(m, params, publish, casOnPointer);
    }
    noteEnvironmentRowHeld(m, p.environment);
    await expireProposals(tx, p.now, p.environment);

    const [{ next }] = await select<{ next: number | string }>(m, NEXT_SEQUENCE, p);
    const sequence = Number(next);
    const id = PlanId.format(p.environment, p.generation, sequence);
    const plan = await insertReturning(
      m,
      Plan,
      submittedPlan(p, sequence, publish, before.proposalTtlSeconds),
      LARGE_FIELDS,
    );
    for (const [position, rule] of p.policy.rules.entries()) {
      await execute(
        m,
        `INSERT INTO plan_approval_rules (plan_id, position, group_name, required_count)
         VALUES (:id, :position, :group, :count)`,
        { id, position, group: rule.group, count: rule.count },
      );
    }
    if (publish) {
      // Forward by admission: the held row's fence is this generation, whose plans all come
      // before the new sequence.
      await execute(
        m,
        `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
           current_sequence = :sequence
         WHERE name = :environment`,
        { id, environment: p.environment, generation: p.generation, sequence },
      );
      await afterPublication(m, p.environment, id);
    } else {
      // Never the new plan: it is of the fence's generation and after the current plan.
      await markObsolete(m, p.environment);
    }
    announceSubmitted(tx, plan, publish, p.now);
    return plan;
  }

  /**
   * Whether submitAtOnce may decide this submit (PostgreSQL): one whose policies deny
   * nothing and add no rules, and that is bound to no deployment sequence or Terraform state
   * (R56, R57: those are decided by admitPlan's statements).
   */
  decidesInOneStatement(
    p: Pick<Submit, 'policy' | 'basedOnDeploymentSequence' | 'priorState'>,
  ): boolean {
    return (
      !p.policy.denial &&
      !p.policy.rules.length &&
      p.basedOnDeploymentSequence == null &&
      p.priorState == null
    );
  }

  /**
   * PostgreSQL: admitPlan's decision, by the same rules, for a submit whose policies add no
   * rules and deny nothing, made by one statement (`planfence_submit_plan_at_once`,
   * installed by migrations: its text keeps admitPlan's statements in their order), which
   * also records what the decision adds (`record`, of the plan as stored but for
   * DECIDED_PLAN_FIELDS), for a transaction that sends it with its COMMIT without waiting
   * for its answer. The statement also reads the clock unless `now` is given, and checks the
   * call's idempotency record. Returns the stored plan once the answer came, or null: the
   * statement did not admit it (a rejection, a remembered call) and wrote nothing. An
   * admission that expired proposals fails the transaction (atOnceDeclined) with
   * nothing written. In both cases the submit is then decided by admitPlan, whose reads
   * name a rejection and whose idempotency recall replays a remembered call.
   */
  submitAtOnce(
    m: EntityManager,
    p: Submit & { now: number | null; idempotency: { principal: string; key: string } | null },
    /** What the decision adds besides the plan (src/decisions/submit-at-once.ts), of the provisional plan. */
    record: (provisional: Plan) => object,
  ): Promise<Plan | null> {
    if (!this.decidesInOneStatement(p)) throw new Error('this submit is decided by admitPlan');
    // Its sequence, status and dates are placeholders: the statement decides them
    // (DECIDED_PLAN_FIELDS), and `record` leaves them to it.
    const provisional = Object.assign(new Plan(), submittedPlan({ ...p, now: 0 }, 0, true, null));
    const stored = selectLater<{ decision: SubmitDecision }>(
      m,
      ...submitStatement(p, JSON.stringify(record(provisional))),
    ).then(([{ decision }]) => {
      if (decision.outcome !== 'admitted') return null;
      const now = Number(decision.now);
      return Object.assign(
        new Plan(),
        submittedPlan({ ...p, now }, decision.sequence, decision.publish, decision.ttlSeconds),
      );
    });
    // Awaited once the transaction committed; a failed one is the transaction's failure.
    stored.catch(() => undefined);
    return stored;
  }

  /**
   * SQLite, while the writer thread runs (Database.writesOnThread): admitPlan's decision for
   * a submit decidesInOneStatement admits, made by the thread (SUBMIT_ON_THREAD: admitPlan's
   * statements, in their order), which also records what the decision adds (`record`, of
   * the plan as stored but for DECIDED_PLAN_FIELDS). Returns the stored plan once its group
   * committed, after `committed` was given it and its audit event's id; or null: the thread
   * did not admit it (a rejection, a remembered call, expired proposals) and wrote nothing,
   * and the submit is then decided by admitPlan.
   */
  async submitOnThread(
    db: Database,
    p: Submit & { now: number | null; idempotency: { principal: string; key: string } },
    record: (provisional: Plan) => SubmitOnThread['record'],
    committed: (plan: Plan, auditId: number) => void,
  ): Promise<Plan | null> {
    if (!this.decidesInOneStatement(p)) throw new Error('this submit is decided by admitPlan');
    const provisional = Object.assign(new Plan(), submittedPlan({ ...p, now: 0 }, 0, true, null));
    let stored: Plan | null = null;
    await db.writeOnThread(
      SUBMIT_ON_THREAD,
      {
        submit: {
          environment: p.environment,
          principal: p.principal,
          generation: p.generation,
          policyVersion: p.policy.version,
          basedOnPlanId: p.basedOnPlanId,
          title: p.title,
          content: p.content,
          contentHash: p.contentHash,
          contentType: p.contentType,
          summary: p.summary,
          artifact: p.artifact,
          artifactHash: p.artifactHash,
          sourceRevision: p.sourceRevision,
          policyResults: JSON.stringify(p.policy.results),
          now: p.now,
          idempotencyPrincipal: p.idempotency.principal,
          idempotencyKey: p.idempotency.key,
        },
        record: record(provisional),
      },
      (decision) => {
        if (decision.outcome !== 'admitted') return;
        const { now, sequence, publish, ttlSeconds } = decision;
        stored = Object.assign(
          new Plan(),
          submittedPlan({ ...p, now }, sequence, publish, ttlSeconds),
        );
        committed(stored, decision.auditId);
      },
    );
    return stored;
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
  async approvePlan(
    tx: DecisionTx,
    p: {
      planId: string;
      reviewer: string;
      contentHash: string | null;
      breakGlassReason: string | null;
      /** R47: the environment's deployment sequence the reviewer saw the plan against. */
      deploymentSequence?: number | null;
      /** The door the approval came through, recorded with it. */
      via?: string | null;
      now: number;
    },
  ): Promise<Plan> {
    const m = tx.manager;
    const plan = await readPlan(m, p.planId);
    const breakGlass = p.breakGlassReason != null;
    const params = {
      ...p,
      deploymentSequence: p.deploymentSequence ?? null,
      via: p.via ?? null,
      id: plan.id,
      environment: plan.environment,
      generation: plan.generation,
      sequence: plan.sequence,
      basedOnPlanId: plan.basedOnPlanId,
      basedOnDeploymentSequence: plan.basedOnDeploymentSequence,
      submitter: plan.submittedBy,
    };
    // R7, R33 and R56: the compare-and-swaps publication demands, on the pointer, on the
    // deployment sequence the plan was made against and on the Terraform state it was
    // computed from.
    const cas = publicationCas(plan, 'e', 'p.id');
    // R51: publication demands the promotion, break-glass or not.
    const promotion = promotionMet(REVISION_OF_PLAN, 'e');
    // Sent together (one round trip on PostgreSQL), run in this order: none of their texts
    // depends on another's answer.
    const [, expired, approved] = await Promise.all([
      takeEnvironmentRow(m, plan.environment),
      expiringProposals(m, p.now, plan.environment),
      execute(
        m,
        `INSERT INTO approvals (plan_id, approver, at, content_hash, break_glass_reason, via)
       SELECT p.id, CAST(:reviewer AS VARCHAR(63)), CAST(:now AS BIGINT), p.content_hash,
         CAST(:breakGlassReason AS VARCHAR(255)), CAST(:via AS VARCHAR(16))
       FROM plans p JOIN environments e ON e.name = p.environment
       WHERE p.id = :id AND p.status = 'PROPOSED' AND p.purged_at IS NULL
         AND p.submitted_by <> :reviewer
         AND (p.expires_at IS NULL OR p.expires_at > :now)
         AND p.generation = e.fence
         AND (e.current_generation < p.generation
           OR (e.current_generation = p.generation AND e.current_sequence < p.sequence))
         ${p.contentHash != null ? 'AND p.content_hash = :contentHash' : ''}
         ${p.deploymentSequence != null ? 'AND e.deployment_sequence = :deploymentSequence' : ''}
         AND NOT EXISTS (SELECT 1 FROM approvals mine WHERE mine.plan_id = :id AND mine.approver = :reviewer)
         AND ${
           breakGlass
             ? `${cas} AND ${promotion}`
             : `(${RULE_SHORT_EVEN_WITH_REVIEWER} OR NOT ${CHECKS_MET}
               OR (e.frozen_at IS NULL AND ${cas} AND ${promotion}))`
         }`,
        params,
      ),
    ]);
    await announceExpired(tx, expired, p.now);
    if (!approved) throw await whyApprovalRejected(m, plan, p);
    // The pointer moves on its own conditions. Those it repeats from the approval (the
    // compare-and-swaps, the content hash, a break-glass approval's reason) cannot change
    // in between while this transaction holds the environment's row: they stand so that
    // the statement that publishes never depends on that hold. The statements after it
    // change nothing unless it moved the pointer to this plan, so all four are sent
    // together (one round trip on PostgreSQL); the plan is read after them, as it stands
    // whether or not this approval published it.
    // The id of the decision's audit event, drawn while the environment's row is held.
    drawId(m, AuditEvent);
    const [published, marked, , after] = await Promise.all([
      execute(
        m,
        `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
         current_sequence = :sequence
       WHERE name = :environment AND fence = :generation AND ${POINTER_MOVES_FORWARD}
         ${plan.basedOnPlanId != null ? 'AND current_plan_id = :basedOnPlanId' : ''}
         ${plan.basedOnDeploymentSequence != null ? 'AND deployment_sequence = :basedOnDeploymentSequence' : ''}
         ${plan.priorStateSerial != null ? `AND ${stateNotOlder(':id', 'environments')}` : ''}
         ${breakGlass ? '' : `AND frozen_at IS NULL AND ${RULES_MET} AND ${CHECKS_MET}`}
         AND ${promotionMet(REVISION_OF_PLAN, 'environments')}
         AND EXISTS (SELECT 1 FROM approvals a WHERE a.plan_id = :id AND a.approver = :reviewer
                     ${breakGlass ? 'AND a.break_glass_reason IS NOT NULL' : ''})
         AND EXISTS (SELECT 1 FROM plans p WHERE p.id = :id AND p.status = 'PROPOSED'
                     AND p.purged_at IS NULL AND p.submitted_by <> :reviewer
                     AND (p.expires_at IS NULL OR p.expires_at > :now)
                     ${p.contentHash != null ? 'AND p.content_hash = :contentHash' : ''})`,
        params,
      ),
      execute(
        m,
        `UPDATE plans SET status = 'PUBLISHED', reviewed_by = :reviewer, reviewed_at = :now,
         published_at = :now
       WHERE id = :id AND status = 'PROPOSED' AND ${IS_CURRENT}`,
        params,
      ),
      // Changes other plans of the environment only.
      afterPublication(m, plan.environment, plan.id),
      readPlan(m, plan.id),
    ]);
    // Not the completing approval: the plan stays PROPOSED.
    if (!published) return after;
    // A concurrent expiry by the retention job may have changed the plan after our pointer
    // statement read it: then the approval runs again.
    changedOrRetry(marked);
    if (breakGlass) {
      // R50: break-glass skips the required checks still pending, and says so.
      const skipped = await pendingChecksOf(m, after);
      if (skipped.length) {
        tx.decided({
          kind: 'audit',
          at: p.now,
          entry: {
            environment: after.environment,
            actor: p.reviewer,
            action: 'CHECKS_SKIPPED',
            planId: after.id,
            outcome: AuditOutcome.ACCEPTED,
            detail: `published by break-glass (${p.breakGlassReason}) without the required checks ${skipped.join(', ')}`,
          },
        });
      }
    }
    tx.decided({
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.published',
      plan: after,
      actor: p.reviewer,
      at: p.now,
    });
    tx.decided({ kind: 'planPublished', plan: after });
    return after;
  }

  /**
   * R50: records `status` as the latest result of check `name` on the plan, while the plan is
   * PROPOSED (else INVALID_PLAN_STATE, or whatever else names why it is no longer
   * publishable). A report after which every required check is SUCCESS and the approval
   * rules are met (only the rules the plan's policies added, where the environment needs no
   * approval) is a publishing step (R15): it is recorded only if the plan may be published now
   * (the fence's generation, after the current plan, not frozen, R7, R33, R56, R51), and
   * publishes it in the same transaction. As for approvals, three statements decide, after
   * the first takes the environment's row:
   * 1. the result is recorded (the latest per plan and name) only if the plan is PROPOSED and,
   *    where the report completes what publication needs, only if publication is possible;
   * 2. the pointer moves only if R5–R7, R33, R56, R51 hold, the environment is not frozen,
   *    the rules are met and every required check's latest result is SUCCESS;
   * 3. the plan is marked PUBLISHED.
   * Announced: check.reported, and plan.published when it published.
   */
  async reportCheck(
    tx: DecisionTx,
    p: {
      planId: string;
      name: string;
      status: 'PENDING' | 'SUCCESS' | 'FAILURE';
      summary: string | null;
      detailsUrl: string | null;
      reporter: string;
      now: number;
    },
  ): Promise<Plan> {
    const m = tx.manager;
    const plan = await readPlan(m, p.planId);
    // requireApproval never changes after an environment is created.
    const { requireApproval } = await readEnvironment(m, plan.environment);
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
    // R14, R35: where the environment needs no approval, only the plan's own rules count.
    const rulesMet = requireApproval ? RULES_MET : PLAN_RULES_MET;
    const [, expired, recorded] = await Promise.all([
      takeEnvironmentRow(m, plan.environment),
      expiringProposals(m, p.now, plan.environment),
      execute(
        m,
        `INSERT INTO check_results (plan_id, name, status, summary, details_url, reported_by, at)
       SELECT p.id, CAST(:name AS VARCHAR(63)), CAST(:status AS VARCHAR(16)),
         CAST(:summary AS VARCHAR(1024)), CAST(:detailsUrl AS VARCHAR(2048)),
         CAST(:reporter AS VARCHAR(63)), CAST(:now AS BIGINT)
       FROM plans p JOIN environments e ON e.name = p.environment
       WHERE p.id = :id AND p.status = 'PROPOSED' AND p.purged_at IS NULL
         AND (p.expires_at IS NULL OR p.expires_at > :now)
         AND (NOT (${rulesMet} AND ${checksMetWithReport(p.status)})
           OR (p.generation = e.fence
             AND (e.current_generation < p.generation
               OR (e.current_generation = p.generation AND e.current_sequence < p.sequence))
             AND e.frozen_at IS NULL AND ${publicationCas(plan, 'e', 'p.id')}
             AND ${promotionMet(REVISION_OF_PLAN, 'e')}))
       ON CONFLICT (plan_id, name) DO UPDATE SET status = excluded.status,
         summary = excluded.summary, details_url = excluded.details_url,
         reported_by = excluded.reported_by, at = excluded.at`,
        params,
      ),
    ]);
    await announceExpired(tx, expired, p.now);
    if (!recorded) throw await whyReportRejected(m, plan, p.now);
    drawId(m, AuditEvent);
    const [published, marked, , after] = await Promise.all([
      execute(
        m,
        `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
         current_sequence = :sequence
       WHERE name = :environment AND fence = :generation AND ${POINTER_MOVES_FORWARD}
         AND ${publicationCas(plan, 'environments', ':id')}
         AND frozen_at IS NULL AND ${rulesMet} AND ${CHECKS_MET}
         AND ${promotionMet(REVISION_OF_PLAN, 'environments')}
         AND EXISTS (SELECT 1 FROM plans p WHERE p.id = :id AND p.status = 'PROPOSED'
                     AND p.purged_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > :now))`,
        params,
      ),
      execute(
        m,
        `UPDATE plans SET status = 'PUBLISHED', reviewed_at = :now, published_at = :now,
         reviewed_by = (SELECT a.approver FROM approvals a WHERE a.plan_id = :id
           ORDER BY a.at DESC, a.approver LIMIT 1)
       WHERE id = :id AND status = 'PROPOSED' AND ${IS_CURRENT}`,
        params,
      ),
      afterPublication(m, plan.environment, plan.id),
      readPlan(m, plan.id),
    ]);
    tx.decided({
      kind: 'outbox',
      subject: 'event',
      type: 'check.reported',
      actor: p.reporter,
      at: p.now,
      event: {
        environment: after.environment,
        type: 'check.reported',
        at: p.now,
        generation: after.generation,
        sequence: after.sequence,
        planId: after.id,
        deploymentSequence: null,
        actor: p.reporter,
        data: {
          planId: after.id,
          name: p.name,
          status: p.status,
          summary: p.summary,
          detailsUrl: p.detailsUrl,
        },
      },
    });
    if (!published) return after;
    changedOrRetry(marked);
    tx.decided({
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.published',
      plan: after,
      actor: p.reporter,
      at: p.now,
    });
    tx.decided({ kind: 'planPublished', plan: after });
    return after;
  }

  async rejectPlan(
    tx: DecisionTx,
    p: { planId: string; reviewer: string; reason: string; now: number },
  ): Promise<Plan> {
    const m = tx.manager;
    const { environment } = await readPlan(m, p.planId);
    // Takes the environment's row first (PostgreSQL), as every decision that announces an
    // event does; the three are sent together (one round trip), run in this order.
    const [, expired, [plan]] = await Promise.all([
      takeEnvironmentRow(m, environment),
      expiringProposals(m, p.now, environment),
      updateEntities(
        m,
        Plan,
        `UPDATE plans SET status = 'REJECTED', reviewed_by = :reviewer, reviewed_at = :now,
         rejection_reason = :reason
       WHERE id = :planId AND status = 'PROPOSED'
       RETURNING *`,
        p,
      ),
    ]);
    await announceExpired(tx, expired, p.now);
    if (!plan) {
      const { id, status } = await readPlan(m, p.planId);
      throw new FenceError('INVALID_PLAN_STATE', `plan ${id} is ${status}, not PROPOSED`, {
        status,
      });
    }
    tx.decided({
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.rejected',
      plan,
      actor: p.reviewer,
      at: p.now,
    });
    return plan;
  }
}

/** What a submit asks for, decided at the policy version `policy.version`. */
type Submit = {
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
  /** R56: the Terraform state the plan file was computed from. */
  priorState: { lineage: string; serial: number } | null;
  sourceRevision: string | null;
  policy: PolicyDecision;
};

/** What planfence_submit_plan_at_once answers (see its migrations). */
type SubmitDecision =
  | { outcome: 'remembered'; now: number }
  | { outcome: 'rejected'; now: number; publish: boolean }
  | {
      outcome: 'admitted';
      now: number;
      publish: boolean;
      sequence: number;
      /** The environment's proposalTtlSeconds the plan's expiresAt came from. */
      ttlSeconds: number | null;
      expired: string[];
      auditId: number;
    };

/**
 * R7, R33, R56: the compare-and-swaps publication of `plan` demands of environment row `env`
 * (an alias), with `planRow` the SQL that names the plan's id: the pointer still at the plan
 * it was based on, the deployment sequence still the one it was made against, the state it
 * was computed from not older than the last reported. One text for every publishing step.
 */
function publicationCas(
  plan: Pick<Plan, 'basedOnPlanId' | 'basedOnDeploymentSequence' | 'priorStateSerial'>,
  env: string,
  planRow: string,
): string {
  return [
    plan.basedOnPlanId != null ? `${env}.current_plan_id = :basedOnPlanId` : '1 = 1',
    plan.basedOnDeploymentSequence != null
      ? `${env}.deployment_sequence = :basedOnDeploymentSequence`
      : '1 = 1',
    plan.priorStateSerial != null ? stateNotOlder(planRow, env) : '1 = 1',
  ].join(' AND ');
}

/** The row a submit stores: PUBLISHED at once, or PROPOSED (expiring after `ttlSeconds`). */
function submittedPlan(
  p: Submit & { now: number },
  sequence: number,
  publish: boolean,
  ttlSeconds: number | null,
): Partial<Plan> {
  const at = new Date(p.now);
  return {
    id: PlanId.format(p.environment, p.generation, sequence),
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
    priorStateLineage: p.priorState?.lineage ?? null,
    priorStateSerial: p.priorState?.serial ?? null,
    sourceRevision: p.sourceRevision,
    submittedBy: p.principal,
    submittedAt: at,
    basedOnPlanId: p.basedOnPlanId,
    reviewedBy: null,
    reviewedAt: null,
    rejectionReason: null,
    publishedAt: publish ? at : null,
    purgedAt: null,
    expiresAt: !publish && ttlSeconds != null ? new Date(p.now + ttlSeconds * 1000) : null,
    policyVersion: p.policy.version,
    policyResults: p.policy.results,
  };
}

/** A stored submit's announcements: plan.submitted, and plan.published when it published. */
function announceSubmitted(tx: DecisionTx, plan: Plan, publish: boolean, now: number): void {
  const actor = plan.submittedBy;
  tx.decided({ kind: 'outbox', subject: 'plan', type: 'plan.submitted', plan, actor, at: now });
  if (publish) {
    tx.decided({ kind: 'outbox', subject: 'plan', type: 'plan.published', plan, actor, at: now });
    tx.decided({ kind: 'planPublished', plan });
  }
}

/**
 * The statement of planfence_submit_plan_at_once for this submit, with `record` (the JSON of
 * what it records besides the plan).
 */
function submitStatement(
  p: Submit & { now: number | null; idempotency: { principal: string; key: string } | null },
  record: string,
): [string, Record<string, unknown>] {
  return [
    `SELECT planfence_submit_plan_at_once(CAST(:environment AS text), CAST(:principal AS text),
       CAST(:generation AS integer), CAST(:policyVersion AS integer),
       CAST(:basedOnPlanId AS text), CAST(:basedOnDeploymentSequence AS integer),
       CAST(:title AS text), CAST(:content AS text), CAST(:contentHash AS text),
       CAST(:contentType AS text), CAST(:summary AS text), CAST(:artifact AS text),
       CAST(:artifactHash AS text), CAST(:sourceRevision AS text),
       CAST(:policyResults AS text), CAST(:now AS bigint),
       CAST(:idempotencyPrincipal AS text), CAST(:idempotencyKey AS text),
       CAST(:record AS jsonb)) AS decision`,
    {
      record,
      ...p,
      policyVersion: p.policy.version,
      policyResults: JSON.stringify(p.policy.results),
      idempotencyPrincipal: p.idempotency?.principal ?? null,
      idempotencyKey: p.idempotency?.key ?? null,
    },
  ];
}

/**
 * The fields of a submitted plan that its statement decides (submittedPlan's `sequence`,
 * `publish`, `now`, `ttlSeconds`): a submit at once leaves them to the database
 * (planfence_submit_plan_at_once fills in each by its name, a date also as `${name}Iso`).
 */
export const DECIDED_PLAN_FIELDS = {
  id: { date: false },
  sequence: { date: false },
  status: { date: false },
  submittedAt: { date: true },
  publishedAt: { date: true },
  expiresAt: { date: true },
} as const satisfies Partial<Record<keyof Plan, { date: boolean }>>;

/** The SQLSTATE of planfence_submit_plan_at_once when an admission expired proposals. */
const DECIDED_BY_STATEMENTS = 'PF409';

/** Whether a transaction failed because its submit at once expired proposals (see submitAtOnce). */
export function atOnceDeclined(error: unknown): boolean {
  return (
    (error as { driverError?: { code?: string } } | null)?.driverError?.code ===
    DECIDED_BY_STATEMENTS
  );
}

/**
 * R50: names the refusal of a check report that was not recorded: the plan is decided
 * (INVALID_PLAN_STATE {status}), below the fence, or the report would have published it and
 * publication is not possible now.
 */
async function whyReportRejected(m: EntityManager, reported: Plan, now: number): Promise<Error> {
  const env = await readEnvironment(m, reported.environment);
  // Re-read: expiry may have been materialised in this transaction.
  const plan = await readPlan(m, reported.id);
  if (plan.status !== PlanStatus.PROPOSED) {
    return new FenceError(
      'INVALID_PLAN_STATE',
      `plan ${plan.id} is ${plan.status}: checks are reported on PROPOSED plans only`,
      { status: plan.status },
    );
  }
  if (plan.purgedAt != null) {
    return new FenceError(
      'INVALID_PLAN_STATE',
      `plan ${plan.id} waited past the retention period and its content was purged; submit it again`,
      { status: plan.status },
    );
  }
  if (plan.generation < env.fence) {
    return new FenceError(
      'STALE_GENERATION',
      `plan ${plan.id}'s generation ${plan.generation} is below the fence ${env.fence}`,
      { generation: plan.generation, fence: env.fence },
    );
  }
  return whyNotPublishable(m, plan, env, false, now);
}
