import type { Transaction } from '../database/transaction.js';
import { execute, select } from '../database/sql.js';

/*
 * The environment rows a transaction holds (Transaction.heldRows). On PostgreSQL a statement
 * that changed a row holds that row's lock to the end of its transaction (these transactions
 * use no savepoints there), so a transaction that already changed its environment's row need
 * not take it again, as the outbox does before it records an event.
 */

const rowOf = (environment: string) => `environments:${environment}`;

/** Notes that a statement of transaction `m` changed `environment`'s row. */
export function noteEnvironmentRowHeld(m: Transaction, environment: string): void {
  m.heldRows.add(rowOf(environment));
}

/**
 * Takes `environment`'s row for the rest of transaction `m` (PostgreSQL: waits for any
 * transaction that holds it); false when there is no such environment.
 */
export async function takeEnvironmentRow(m: Transaction, environment: string): Promise<boolean> {
  const found = await execute(
    m,
    'UPDATE environments SET fence = fence WHERE name = :environment',
    {
      environment,
    },
  );
  if (found) noteEnvironmentRowHeld(m, environment);
  return found > 0;
}

/**
 * PostgreSQL: takes `environment`'s row for the rest of transaction `m` without changing it
 * (SELECT … FOR UPDATE), unless the transaction holds it already.
 */
export async function ensureEnvironmentRowHeld(m: Transaction, environment: string): Promise<void> {
  if (m.heldRows.has(rowOf(environment))) return;
  await select(m, 'SELECT name FROM environments WHERE name = :environment FOR UPDATE', {
    environment,
  });
  noteEnvironmentRowHeld(m, environment);
}
