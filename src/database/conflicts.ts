import { QueryFailedError } from 'typeorm';

/** Thrown inside a write transaction to roll it back and run it again (a lost race, not a client error). */
export class RetryTransaction extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'RetryTransaction';
  }
}

/**
 * `changed` (a row a statement returned, or its count of changed rows) when the statement
 * changed something; else RetryTransaction. For statements the transaction's earlier
 * decision already implies: on PostgreSQL (READ COMMITTED) a transaction that committed
 * in between can still have changed the row first, and running again sees it.
 */
export function changedOrRetry<T>(changed: T | undefined | 0): T {
  if (!changed) throw new RetryTransaction('a concurrent transaction changed the row first');
  return changed;
}

/** How often a transaction that lost a race runs again. */
export const MAX_ATTEMPTS = 8;

/** Unique violations, serialization failures and deadlocks: the transaction lost a race and can run again. */
export function isConflict(error: unknown): boolean {
  if (error instanceof RetryTransaction) return true;
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = (error as QueryFailedError & { driverError?: { code?: string } }).driverError;
  const code = driverError?.code ?? '';
  return [
    '23505',
    '40001',
    '40P01',
    'SQLITE_CONSTRAINT_PRIMARYKEY',
    'SQLITE_CONSTRAINT_UNIQUE',
  ].includes(code);
}
