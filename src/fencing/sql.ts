import { MAX_INT32 } from '../common/validation.js';

/**
 * The SQL fragments the guard's statements share. The named parameters are those of the
 * statements that use them.
 */

/**
 * R14: how many approvers of plan `plan` count toward approval rule `r` (any approver where
 * r.group_name is null, else those in that group). The submitter (`submitter`) never counts.
 * The guard's statements and the reads of pending rules share this one definition.
 */
export function approvalsOfRule(plan = ':id', submitter = ':submitter'): string {
  return `(SELECT COUNT(*) FROM approvals a
  WHERE a.plan_id = ${plan} AND a.approver <> ${submitter}
    AND (r.group_name IS NULL OR EXISTS (SELECT 1 FROM principal_groups g
      WHERE g.principal = a.approver AND g.group_name = r.group_name)))`;
}

/** R14: approvalsOfRule of plan :id, submitted by :submitter. */
export const APPROVALS_OF_RULE = approvalsOfRule();

/** The stored deployment statuses that block a start: IN_PROGRESS (live or lapsed) and UNKNOWN. */
export const ACTIVE_DEPLOYMENT = `status IN ('IN_PROGRESS', 'UNKNOWN')`;

/**
 * R1: the largest generation an environment issues, the largest a client can hold (a
 * GraphQL Int). Once it is issued, the environment grants no more leases.
 */
export const LAST_GENERATION = MAX_INT32;

/**
 * R1, R3: an environment's next generation, issued to its new lease; a STRICT environment
 * raises its fence to it in the same statement.
 */
export const ISSUE_GENERATION = `last_issued_generation = last_issued_generation + 1,
  fence = CASE WHEN mode = 'STRICT' THEN last_issued_generation + 1 ELSE fence END,
  lease_generation = last_issued_generation + 1`;

/** The WAITING tickets of :environment not expired at :now. */
export const WAITING_TICKETS = `SELECT 1 FROM lease_tickets w WHERE w.environment = :environment
  AND w.status = 'WAITING' AND w.expires_at > :now`;

/** The id of the head of :environment's queue at :now: its oldest WAITING ticket not expired. */
export const HEAD_TICKET = `SELECT MIN(h.id) FROM lease_tickets h WHERE h.environment = :environment
  AND h.status = 'WAITING' AND h.expires_at > :now`;

/** The caller's own lease of :generation is the environment's live lease at :now. */
export const LIVE_LEASE_OF_CALLER = `lease_holder IS NOT NULL AND lease_generation = :generation
  AND lease_principal = :principal AND lease_expires_at > :now`;

/** R6: (generation, sequence) strictly after the current plan's. */
export const POINTER_MOVES_FORWARD = `(current_generation < :generation
  OR (current_generation = :generation AND current_sequence < :sequence))`;

/** 1 when :reviewer would count toward rule `r`, else 0. */
export const REVIEWER_IN_RULE = `(CASE WHEN r.group_name IS NULL OR EXISTS (SELECT 1 FROM principal_groups g
  WHERE g.principal = :reviewer AND g.group_name = r.group_name) THEN 1 ELSE 0 END)`;

/**
 * R14, R35: every rule of :environment, and every rule plan :id's policies added, is met by
 * the approvals recorded for the plan.
 */
export const RULES_MET = `NOT EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = :environment
  AND ${APPROVALS_OF_RULE} < r.required_count)
  AND NOT EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = :id
  AND ${APPROVALS_OF_RULE} < r.required_count)`;

/** Some rule of :environment or of plan :id stays unmet even with :reviewer's approval added: it would not complete them. */
export const RULE_SHORT_EVEN_WITH_REVIEWER = `(EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = :environment
  AND ${APPROVALS_OF_RULE} + ${REVIEWER_IN_RULE} < r.required_count)
  OR EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = :id
  AND ${APPROVALS_OF_RULE} + ${REVIEWER_IN_RULE} < r.required_count))`;

/**
 * R56: the prior state `prior` (columns or parameters) is older than `state`: the same
 * lineage at a lower serial, or no state at all (the empty lineage of a workspace that had
 * none yet). The one form of the rule every statement uses.
 */
export function priorStateOlder(
  prior: { lineage: string; serial: string },
  state: { lineage: string; serial: string },
): string {
  return `(${prior.lineage} = ''
    OR (${prior.lineage} = ${state.lineage} AND ${prior.serial} < ${state.serial}))`;
}

/**
 * R56: plan `plan`'s prior state is not older than the state environment `env` last
 * reported. Another lineage, or no report, is never older. Written so that a NULL on either
 * side reads "not older".
 */
export function stateNotOlder(plan: string, env: string): string {
  return `NOT EXISTS (SELECT 1 FROM plans sp WHERE sp.id = ${plan} AND ${env}.state_serial IS NOT NULL
    AND ${priorStateOlder(
      { lineage: 'sp.prior_state_lineage', serial: 'sp.prior_state_serial' },
      { lineage: `${env}.state_lineage`, serial: `${env}.state_serial` },
    )})`;
}

/** R56: the same as stateNotOlder for a submit's :priorLineage and :priorSerial, inside `UPDATE environments`. */
export const SUBMITTED_STATE_NOT_OLDER = `(state_serial IS NULL OR NOT ${priorStateOlder(
  { lineage: ':priorLineage', serial: ':priorSerial' },
  { lineage: 'state_lineage', serial: 'state_serial' },
)})`;

/** R14: every rule of :environment is met by the approvals recorded for plan :id. */
export const ENVIRONMENT_RULES_MET = `NOT EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = :environment
  AND ${APPROVALS_OF_RULE} < r.required_count)`;

/** R35: every rule plan :id's policies added is met by the approvals recorded for it. */
export const PLAN_RULES_MET = `NOT EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = :id
  AND ${APPROVALS_OF_RULE} < r.required_count)`;

/**
 * R50: every required check of :environment has SUCCESS as its latest result on plan :id.
 * The publishing statements and the reads of pending checks share this one definition.
 */
export const CHECKS_MET = `NOT EXISTS (SELECT 1 FROM required_checks rc WHERE rc.environment = :environment
  AND NOT EXISTS (SELECT 1 FROM check_results cr WHERE cr.plan_id = :id AND cr.name = rc.name
    AND cr.status = 'SUCCESS'))`;

/**
 * R50: CHECKS_MET as it will read once check :name's latest result on plan :id is the
 * reported `status` (the report itself not yet recorded).
 */
export function checksMetWithReport(status: string): string {
  return `NOT EXISTS (SELECT 1 FROM required_checks rc WHERE rc.environment = :environment
  AND ${status === 'SUCCESS' ? 'rc.name <> :name' : '1 = 1'}
  AND (rc.name = :name OR NOT EXISTS (SELECT 1 FROM check_results cr WHERE cr.plan_id = :id
    AND cr.name = rc.name AND cr.status = 'SUCCESS')))`;
}

/**
 * R51: a plan of source revision `revision` (an SQL expression) may be published in
 * environment `env` (an alias or the table) at :now as far as promotion goes: the environment
 * names no `from`, or `from`'s latest finished deployment SUCCEEDED with a plan of the same
 * sourceRevision (a plan without one, NULL, is never promoted) and finished at least the
 * soak time before :now.
 */
export function promotionMet(revision: string, env: string): string {
  return `(${env}.promotion_from IS NULL OR EXISTS (SELECT 1 FROM deployments pd
    JOIN plans pdp ON pdp.id = pd.plan_id
    WHERE pd.environment = ${env}.promotion_from AND pd.status = 'SUCCEEDED'
      AND pd.finished_at <= CAST(:now AS BIGINT) - ${env}.promotion_soak_minutes * 60000
      AND pdp.source_revision = ${revision}
      AND pd.sequence = (SELECT MAX(lf.sequence) FROM deployments lf
        WHERE lf.environment = ${env}.promotion_from AND lf.status IN ('SUCCEEDED', 'FAILED'))))`;
}

/**
 * R52: plan `plan` was published no longer than environment `env`'s deployWithinMinutes
 * before :now (or the environment sets no window).
 */
export function withinDeployWindow(plan: string, env: string): string {
  return `(${env}.deploy_within_minutes IS NULL OR EXISTS (SELECT 1 FROM plans wp WHERE wp.id = ${plan}
    AND wp.published_at >= CAST(:now AS BIGINT) - ${env}.deploy_within_minutes * 60000))`;
}

/** R51: the source revision of plan :id, for promotionMet. */
export const REVISION_OF_PLAN = '(SELECT pp.source_revision FROM plans pp WHERE pp.id = :id)';

/**
 * R3, R4, R5 and what a submit demands besides (admitPlan): the one conditional statement
 * that admits a submit. Its parameters: admitPlan's `params`.
 */
export function admissionStatement(demands: {
  /** The submit publishes: R17, R51, and the CAS on the pointer when `casOnPointer`. */
  publish: boolean;
  casOnPointer: boolean;
  /** R57: the deployment sequence, the Terraform state it was made against. */
  casOnSequence: boolean;
  casOnState: boolean;
}): string {
  const { publish, casOnPointer, casOnSequence, casOnState } = demands;
  return `UPDATE environments SET fence = :generation
     WHERE name = :environment AND policy_version = :policyVersion
       AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = :environment
                   AND g.generation = :generation AND g.principal = :principal)
       AND ((mode = 'MONOTONIC' AND fence <= :generation)
         OR (mode = 'STRICT' AND fence = :generation AND lease_generation = :generation
             AND lease_principal = :principal AND lease_expires_at > :now))
       ${casOnPointer ? 'AND current_plan_id = :basedOnPlanId' : ''}
       ${casOnSequence ? 'AND deployment_sequence = :basedOnDeploymentSequence' : ''}
       ${casOnState ? `AND ${SUBMITTED_STATE_NOT_OLDER}` : ''}
       ${
         // R51: a submit that would publish demands the promotion too (else it is refused);
         // an environment without one meets it.
         publish
           ? `AND frozen_at IS NULL
       AND ${promotionMet('CAST(:sourceRevision AS VARCHAR(255))', 'environments')}`
           : ''
       }`;
}

/**
 * The next sequence of :environment's plans of :generation: the last entry of the
 * (environment, generation, sequence) index, whatever PostgreSQL's planner knows of the
 * table (migrations/1765900000000-submit-by-index.ts).
 */
export const NEXT_SEQUENCE = `SELECT COALESCE((SELECT sequence FROM plans
   WHERE environment = :environment AND generation = :generation
   ORDER BY sequence DESC LIMIT 1), 0) + 1 AS next`;
