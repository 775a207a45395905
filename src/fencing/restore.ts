import type { EntityManager } from 'typeorm';
import { execute, select } from '../database/database.js';
import { LAST_GENERATION } from './sql.js';

export interface RestoreMargin {
  /** Added to every environment's generation counter (1 to 1,000,000,000). */
  margin: number;
  /** Who ran the restore (audit actor). */
  actor: string;
  now: number;
}

export interface RaisedEnvironment {
  name: string;
  lastIssuedGeneration: number;
  fence: number;
}

/** The margin would carry a generation counter past LAST_GENERATION; nothing was changed. */
export class RestoreMarginTooLarge extends Error {
  constructor(margin: number) {
    super(
      `a margin of ${margin} would carry a generation past ${LAST_GENERATION}; nothing was changed`,
    );
  }
}

/**
 * After a database was restored from a backup, the generations issued between the backup
 * and the loss may still be in agents' hands: issuing them again would give two holders
 * the same fencing token. This raises, in one statement, every environment's generation
 * counter and its deployment sequence by `margin`, moves its fence up to the new counter
 * (never down), and ends every lease granted before (its generation is now below the fence). Every environment gets an
 * audit event RESTORE_MARGIN in the same transaction. All or nothing: if any counter would
 * pass LAST_GENERATION, no environment changes.
 *
 * Runs inside the caller's write transaction (`m`).
 */
export async function raiseAfterRestore(
  m: EntityManager,
  { margin, actor, now }: RestoreMargin,
): Promise<RaisedEnvironment[]> {
  const raised = await execute(
    m,
    `UPDATE environments SET
       last_issued_generation = last_issued_generation + :margin,
       fence = CASE WHEN fence > last_issued_generation + :margin THEN fence
                    ELSE last_issued_generation + :margin END,
       deployment_sequence = deployment_sequence + :margin,
       lease_holder = NULL, lease_principal = NULL, lease_generation = NULL,
       lease_acquired_at = NULL, lease_expires_at = NULL
     WHERE NOT EXISTS (SELECT 1 FROM environments e WHERE e.last_issued_generation > :limit)`,
    { margin, limit: LAST_GENERATION - margin },
  );
  const environments = await select<RaisedEnvironment>(
    m,
    `SELECT name, last_issued_generation AS "lastIssuedGeneration", fence FROM environments ORDER BY name`,
  );
  if (raised !== environments.length) throw new RestoreMarginTooLarge(margin);
  await execute(
    m,
    `INSERT INTO audit_events (at, environment, actor, action, generation, outcome, detail)
     SELECT :now, name, :actor, 'RESTORE_MARGIN', last_issued_generation, 'ACCEPTED', :detail
     FROM environments`,
    {
      now,
      actor,
      detail: `restored from a backup: generation counter raised by ${margin}, fence raised to it, leases ended`,
    },
  );
  return environments.map((e) => ({
    name: e.name,
    lastIssuedGeneration: Number(e.lastIssuedGeneration),
    fence: Number(e.fence),
  }));
}
