import type { EntityManager } from 'typeorm';
import { PlanId } from '../common/ids.js';
import { execute, updateReturning } from '../database/database.js';
import type { DecisionTx } from './effects.js';
import { readPlan } from './reads.js';

/*
 * The plan statuses other decisions change as they go: proposals that expired (R16), the
 * plan a publication supersedes and the proposals it passes over (R8).
 */

/**
 * R16: PROPOSED plans whose expiresAt has come (by the service clock) become EXPIRED, in
 * one environment or, for the retention job, in all of them. Reads show EXPIRED from that
 * instant already; this makes it the stored status, and announces each (plan.expired).
 */
export async function expireProposals(
  tx: DecisionTx,
  now: number,
  environment?: string,
): Promise<number> {
  const expired = await expiringProposals(tx.manager, now, environment);
  await announceExpired(tx, expired, now);
  return expired.length;
}

/**
 * expireProposals without the announcements: the ids of the plans it made EXPIRED, for a
 * caller that sends this statement together with others and announces them (announceExpired)
 * before anything else it decides.
 */
export async function expiringProposals(
  m: EntityManager,
  now: number,
  environment?: string,
): Promise<string[]> {
  const expired = await updateReturning<{ id: string }>(
    m,
    `UPDATE plans SET status = 'EXPIRED'
     WHERE status = 'PROPOSED' AND expires_at <= :now
       ${environment !== undefined ? 'AND environment = :environment' : ''}
     RETURNING id`,
    { now, environment: environment ?? null },
  );
  return expired.map(({ id }) => id);
}

/** R16: announces the plans that just turned EXPIRED (plan.expired), in the order submitted. */
export async function announceExpired(
  tx: DecisionTx,
  ids: readonly string[],
  now: number,
): Promise<void> {
  // In the order submitted: the order the outbox announces them in does not depend on the
  // database's.
  for (const id of [...ids].sort(PlanId.compare)) {
    const plan = await readPlan(tx.manager, id);
    tx.decided({
      kind: 'outbox',
      subject: 'plan',
      type: 'plan.expired',
      plan,
      actor: 'planfence',
      at: now,
    });
  }
}

/**
 * R8: a proposal (a row of plans) below the fence or older than the current plan of
 * :environment can never be published.
 */
const PASSED_OVER = `EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
  AND (plans.generation < e.fence OR plans.generation < e.current_generation
    OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)))`;

/** Plan :id is :environment's current plan. */
export const IS_CURRENT = `EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
  AND e.current_plan_id = :id)`;

/**
 * R8: the previously published plan reads SUPERSEDED; proposals passed over read OBSOLETE.
 * Two statements, sent together: each names one status, so that both databases find the rows
 * by both columns of the (environment, status) index, not among every plan of the
 * environment, whatever PostgreSQL's planner knows of the table (a `status IN (...)` list
 * is planned as a scan of the environment's plans until the table has been analyzed). Neither
 * changes anything unless plan :id is the environment's current plan, so that they may be
 * sent together with the statement that moves the pointer, before that statement's answer.
 */
export async function afterPublication(
  m: EntityManager,
  environment: string,
  id: string,
): Promise<void> {
  await Promise.all(AFTER_PUBLICATION.map((sql) => execute(m, sql, { environment, id })));
}

/** afterPublication's two statements (:environment, :id). */
export const AFTER_PUBLICATION = [
  `UPDATE plans SET status = 'SUPERSEDED'
   WHERE environment = :environment AND status = 'PUBLISHED' AND id <> :id AND ${IS_CURRENT}`,
  `UPDATE plans SET status = 'OBSOLETE'
   WHERE environment = :environment AND status = 'PROPOSED' AND ${PASSED_OVER}
     AND ${IS_CURRENT}`,
] as const;

/** R8: a proposal below the fence or older than the current plan can never be published. */
export async function markObsolete(m: EntityManager, environment: string): Promise<void> {
  await execute(m, MARK_OBSOLETE, { environment });
}

/** markObsolete's statement (:environment). */
export const MARK_OBSOLETE = `UPDATE plans SET status = 'OBSOLETE'
  WHERE environment = :environment AND status = 'PROPOSED' AND ${PASSED_OVER}`;
