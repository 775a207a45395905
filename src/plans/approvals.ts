import type { EntityManager } from 'typeorm';
import { select, selectLater, jsonList } from '../database/database.js';
import { APPROVALS_OF_RULE, approvalsOfRule } from '../fencing/sql.js';
import type { ApprovalRule } from '../environments/policy.model.js';
import type { Approval, ApprovalSnapshot } from './approval.model.js';
import { mergeRules } from '../policies/policy-decision.js';
import { type Plan, PlanStatus } from '../model/plan.entity.js';

/** How a query is run: at once (`select`), or with the transaction's later statements (`selectLater`). */
type Read = typeof select;

/** Every approval recorded for the plan, in the order they were given. */
export async function approvalsOf(
  m: EntityManager,
  planId: string,
  read: Read = select,
): Promise<Approval[]> {
  const rows = await read<ApprovalRow>(
    m,
    `SELECT approver, at, content_hash, break_glass_reason, via FROM approvals
     WHERE plan_id = :id ORDER BY at, approver`,
    { id: planId },
  );
  return rows.map(approvalOf);
}

interface ApprovalRow {
  approver: string;
  at: number | string;
  content_hash: string;
  break_glass_reason: string | null;
  via: string | null;
}

function approvalOf(row: ApprovalRow): Approval {
  return {
    approver: row.approver,
    at: new Date(Number(row.at)),
    contentHash: row.content_hash,
    breakGlassReason: row.break_glass_reason,
    via: row.via,
  };
}

/** approvalsOf each of the plans, in order, in one statement: a list of plans reads them at once. */
export async function approvalsOfPlans(
  m: EntityManager,
  dialect: 'sqlite' | 'postgres',
  planIds: readonly string[],
): Promise<Approval[][]> {
  const rows = await select<ApprovalRow & { plan_id: string }>(
    m,
    `SELECT plan_id, approver, at, content_hash, break_glass_reason, via FROM approvals
     WHERE plan_id IN (${jsonList(dialect, 'ids', 'text')}) ORDER BY plan_id, at, approver`,
    { ids: JSON.stringify(planIds) },
  );
  const found = new Map<string, Approval[]>(planIds.map((id) => [id, []]));
  for (const row of rows) found.get(row.plan_id)?.push(approvalOf(row));
  return planIds.map((id) => found.get(id)!);
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
  if (!needsRules(status)) return [];
  const rows = await read<RuleRow>(
    m,
    `SELECT r.group_name, r.required_count, ${APPROVALS_OF_RULE} AS met, 0 AS source, r.position
     FROM approval_rules r WHERE r.environment = :environment
     UNION ALL
     SELECT r.group_name, r.required_count, ${APPROVALS_OF_RULE} AS met, 1 AS source, r.position
     FROM plan_approval_rules r WHERE r.plan_id = :id
     ORDER BY source, position`,
    { id: plan.id, submitter: plan.submittedBy, environment: plan.environment },
  );
  return pendingOf(rows, status);
}

interface RuleRow {
  group_name: string | null;
  required_count: number | string;
  met: number | string;
}

/** A published (or superseded) plan needs no approval: nothing to read. */
function needsRules(status: PlanStatus): boolean {
  return status !== PlanStatus.PUBLISHED && status !== PlanStatus.SUPERSEDED;
}

/** The rules a plan in `status` still waits for, from its rules' rows (environment's first). */
function pendingOf(rows: RuleRow[], status: PlanStatus): ApprovalRule[] {
  if (!needsRules(status)) return [];
  const counted = status === PlanStatus.PROPOSED;
  const met = new Map(rows.map((row) => [row.group_name, counted ? Number(row.met) : 0]));
  return mergeRules(
    rows.map((row) => ({ group: row.group_name, count: Number(row.required_count) })),
  )
    .map((rule) => ({ group: rule.group, count: rule.count - met.get(rule.group)! }))
    .filter((rule) => rule.count > 0);
}

/**
 * pendingRulesOf each of the plans (each in the status a read shows), in order, in one
 * statement: a list of plans reads them at once.
 */
export async function pendingRulesOfPlans(
  m: EntityManager,
  dialect: 'sqlite' | 'postgres',
  plans: readonly { plan: Plan; status: PlanStatus }[],
): Promise<ApprovalRule[][]> {
  const ids = [...new Set(plans.filter((p) => needsRules(p.status)).map((p) => p.plan.id))];
  const rows = ids.length
    ? await select<RuleRow & { plan_id: string }>(
        m,
        `SELECT p.id AS plan_id, r.group_name, r.required_count,
           ${approvalsOfRule('p.id', 'p.submitted_by')} AS met, 0 AS source, r.position
         FROM plans p JOIN approval_rules r ON r.environment = p.environment
         WHERE p.id IN (${jsonList(dialect, 'ids', 'text')})
         UNION ALL
         SELECT p.id AS plan_id, r.group_name, r.required_count,
           ${approvalsOfRule('p.id', 'p.submitted_by')} AS met, 1 AS source, r.position
         FROM plans p JOIN plan_approval_rules r ON r.plan_id = p.id
         WHERE p.id IN (${jsonList(dialect, 'ids', 'text')})
         ORDER BY plan_id, source, position`,
        { ids: JSON.stringify(ids) },
      )
    : [];
  const rowsOf = new Map<string, RuleRow[]>(ids.map((id) => [id, []]));
  for (const row of rows) rowsOf.get(row.plan_id)!.push(row);
  return plans.map(({ plan, status }) => pendingOf(rowsOf.get(plan.id) ?? [], status));
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
