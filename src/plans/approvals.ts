import type { EntityManager } from 'typeorm';
import { select, selectLater } from '../database/database.js';
import { APPROVALS_OF_RULE } from '../fencing/sql.js';
import type { ApprovalRule } from '../environments/policy.model.js';
import type { Approval, ApprovalSnapshot } from './approval.model.js';
import { mergeRules } from '../policies/policy-decision.js';
import { type Plan, PlanStatus } from './plan.entity.js';

/** How a query is run: at once (`select`), or with the transaction's later statements (`selectLater`). */
type Read = typeof select;

/** Every approval recorded for the plan, in the order they were given. */
export async function approvalsOf(
  m: EntityManager,
  planId: string,
  read: Read = select,
): Promise<Approval[]> {
  const rows = await read<{
    approver: string;
    at: number | string;
    content_hash: string;
    break_glass_reason: string | null;
  }>(
    m,
    `SELECT approver, at, content_hash, break_glass_reason FROM approvals
     WHERE plan_id = :id ORDER BY at, approver`,
    { id: planId },
  );
  return rows.map((row) => ({
    approver: row.approver,
    at: new Date(Number(row.at)),
    contentHash: row.content_hash,
    breakGlassReason: row.break_glass_reason,
  }));
}

/**
 * R14, R15: for a PROPOSED plan, each rule its approvals do not meet yet, with the number of
 * approvals it still needs as `count`. A published (or superseded) plan needs nothing; an
 * OBSOLETE, EXPIRED or REJECTED plan's approvals count for nothing: every rule in full.
 * R35: the rules the plan's policies added count like the environment's; where both name a
 * group, the larger count is the one rule shown.
 */
export async function pendingRulesOf(
  m: EntityManager,
  plan: Plan,
  status: PlanStatus,
  read: Read = select,
): Promise<ApprovalRule[]> {
  if (status === PlanStatus.PUBLISHED || status === PlanStatus.SUPERSEDED) return [];
  const rows = await read<{
    group_name: string | null;
    required_count: number | string;
    met: number | string;
  }>(
    m,
    `SELECT r.group_name, r.required_count, ${APPROVALS_OF_RULE} AS met, 0 AS source, r.position
     FROM approval_rules r WHERE r.environment = :environment
     UNION ALL
     SELECT r.group_name, r.required_count, ${APPROVALS_OF_RULE} AS met, 1 AS source, r.position
     FROM plan_approval_rules r WHERE r.plan_id = :id
     ORDER BY source, position`,
    { id: plan.id, submitter: plan.submittedBy, environment: plan.environment },
  );
  const counted = status === PlanStatus.PROPOSED;
  const met = new Map(rows.map((row) => [row.group_name, counted ? Number(row.met) : 0]));
  return mergeRules(
    rows.map((row) => ({ group: row.group_name, count: Number(row.required_count) })),
  )
    .map((rule) => ({ group: rule.group, count: rule.count - met.get(rule.group)! }))
    .filter((rule) => rule.count > 0);
}

/**
 * The plan's approvals and pending rules as the decision in the transaction of `m` leaves
 * them, read with the transaction's later statements (on PostgreSQL they travel with its
 * COMMIT): await it once the transaction has committed.
 */
export function snapshotLater(m: EntityManager, plan: Plan): Promise<ApprovalSnapshot> {
  const snapshot = Promise.all([
    approvalsOf(m, plan.id, selectLater),
    pendingRulesOf(m, plan, plan.status, selectLater),
  ]).then(([approvals, pendingApprovalRules]) => ({ approvals, pendingApprovalRules }));
  // Nobody may be waiting yet when the transaction fails: its decision's error is the answer.
  snapshot.catch(() => undefined);
  return snapshot;
}
