import type { EntityManager } from 'typeorm';
import { select } from '../database/database.js';
import { FenceError } from './fence.errors.js';
import { CHECKS_MET } from './sql.js';

/*
 * Preconditions beyond approval (DESIGN §22, R50–R52): the reads the guard makes of them,
 * and the rejections it names once a statement that demanded them affected nothing.
 */

/** An environment's preconditions, as one statement read them (one snapshot). */
export interface Preconditions {
  /** R34: bumped by every change of these settings too; a submit is decided at one version. */
  policyVersion: number;
  requiredChecks: string[];
  promotionFrom: string | null;
  /** The soak of the promotion (meaningless without promotionFrom). */
  promotionSoakMinutes: number;
}

/** The preconditions of `environment` and its policy version, read by one statement. */
export async function readPreconditions(
  m: EntityManager,
  environment: string,
): Promise<Preconditions> {
  const rows = await select<{
    version: number | string;
    from: string | null;
    soak: number | string | null;
    name: string | null;
  }>(
    m,
    `SELECT e.policy_version AS version, e.promotion_from AS "from",
       e.promotion_soak_minutes AS soak, rc.name AS name
     FROM environments e LEFT JOIN required_checks rc ON rc.environment = e.name
     WHERE e.name = :environment ORDER BY rc.position`,
    { environment },
  );
  // The callers read the environment first (NOT_FOUND): it has its row.
  const [first] = rows;
  return {
    policyVersion: Number(first.version),
    requiredChecks: rows.flatMap((row) => (row.name != null ? [row.name] : [])),
    promotionFrom: first.from,
    // Set and cleared with promotionFrom.
    promotionSoakMinutes: Number(first.soak),
  };
}

/**
 * R50: the required checks of the plan's environment whose latest result on it is not
 * SUCCESS, in the environment's order. The negation, for one plan, of CHECKS_MET.
 */
export async function pendingChecksOf(
  m: EntityManager,
  plan: { id: string; environment: string },
): Promise<string[]> {
  const rows = await select<{ name: string }>(
    m,
    `SELECT rc.name AS name FROM required_checks rc WHERE rc.environment = :environment
       AND NOT EXISTS (SELECT 1 FROM check_results cr WHERE cr.plan_id = :id
         AND cr.name = rc.name AND cr.status = 'SUCCESS')
     ORDER BY rc.position`,
    { id: plan.id, environment: plan.environment },
  );
  return rows.map((row) => row.name);
}

/** CHECKS_MET, re-exported for the statements that read it besides the guard's. */
export { CHECKS_MET };

/**
 * R51: why a plan of `sourceRevision` may not be published in `environment` at `now`, or
 * null when promotion allows it (no `from`, or `from`'s latest finished deployment SUCCEEDED
 * with a plan of that revision at least the soak time ago). The same rule as promotionMet,
 * read to name the refusal.
 */
export async function promotionRefused(
  m: EntityManager,
  environment: string,
  sourceRevision: string | null,
  now: number,
  what: string,
): Promise<FenceError | null> {
  const { promotionFrom: from, promotionSoakMinutes } = await readPreconditions(m, environment);
  if (from == null) return null;
  const soakMs = promotionSoakMinutes * 60_000;
  const refuse = (why: string) =>
    new FenceError('PRECONDITION_FAILED', `${what} cannot be promoted from "${from}": ${why}`, {
      reason: 'PROMOTION',
      from,
      sourceRevision,
    });
  if (sourceRevision == null) {
    return refuse('it has no sourceRevision (submit it with the revision it was made from)');
  }
  const [latest] = await select<{
    id: string;
    status: string;
    finishedAt: number | string | null;
    revision: string | null;
  }>(
    m,
    `SELECT d.id AS id, d.status AS status, d.finished_at AS "finishedAt",
       p.source_revision AS revision
     FROM deployments d JOIN plans p ON p.id = d.plan_id
     WHERE d.environment = :from AND d.status IN ('SUCCEEDED', 'FAILED')
     ORDER BY d.sequence DESC LIMIT 1`,
    { from },
  );
  if (!latest) return refuse(`nothing has finished deploying there yet`);
  if (latest.status !== 'SUCCEEDED') {
    return refuse(`its latest finished deployment ${latest.id} ${latest.status}`);
  }
  if (latest.revision !== sourceRevision) {
    return refuse(
      `its latest finished deployment ${latest.id} is of revision ${latest.revision ?? '(none)'}, not ${sourceRevision}`,
    );
  }
  const soakedAt = Number(latest.finishedAt) + soakMs;
  if (soakedAt > now) {
    return refuse(
      `deployment ${latest.id} of ${sourceRevision} soaks until ${new Date(soakedAt).toISOString()} (${promotionSoakMinutes} minutes)`,
    );
  }
  return null;
}
