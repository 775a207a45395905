import { execute } from '../database/sql.js';
import type { DecisionTx } from './effects.js';

/**
 * The statuses whose content goes once the plan is older than the retention period. A
 * PROPOSED plan that old has waited a month for review; once purged it can no longer be
 * approved (the guard refuses plans without content). PUBLISHED content stays.
 */
export const PURGED_STATUSES = [
  'SUPERSEDED',
  'OBSOLETE',
  'REJECTED',
  'EXPIRED',
  'PROPOSED',
] as const;

/**
 * Empties the content and artifact (never the metadata, summary or hashes) of the plans in
 * PURGED_STATUSES submitted before `cutoff`, once: the number of plans purged now.
 */
export function purgePlanContents(tx: DecisionTx, now: number, cutoff: number): Promise<number> {
  return execute(
    tx.manager,
    `UPDATE plans SET content = '', artifact = NULL, purged_at = :now
     WHERE status IN (${PURGED_STATUSES.map((status) => `'${status}'`).join(', ')})
       AND submitted_at < :cutoff AND purged_at IS NULL`,
    { now, cutoff },
  );
}
