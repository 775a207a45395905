import { type DataSource, EntityManager, type QueryRunner } from 'typeorm';

/** Who waits for the rows of a read held back with the later statements (selectLater). */
export interface Reader {
  resolve: (rows: unknown) => void;
  reject: (error: unknown) => void;
}

/** A statement held back until the next one waited for, or the COMMIT (executeLater, selectLater). */
export type Later = [string, Record<string, unknown>, Reader?];

/**
 * The manager of one transaction that Database.write runs, and what the transaction carries
 * besides its statements. Everything here lives and ends with the transaction: the code that
 * runs in it is handed this object, and nothing keeps transaction state anywhere else.
 * (On SQLite, each write of a group commit is a Transaction of its own: its own savepoint.)
 */
export class Transaction extends EntityManager {
  /** Run once the transaction has committed, in order (Database.afterCommit); never if it rolls back. */
  readonly onCommit: (() => void)[] = [];
  /** PostgreSQL: the notifications made in it, sent together just before its COMMIT (Database.notify). */
  readonly notifications: [string, string][] = [];
  /**
   * PostgreSQL: its later statements (executeLater): those not sent yet, and the answers still
   * to come of those sent. Null where every statement runs at once (SQLite).
   */
  later: { unsent: Later[]; answers: Promise<unknown>[] } | null = null;
  /** PostgreSQL: ids drawn ahead of their rows, by entity (drawId, takeDrawnId). */
  readonly drawnIds = new Map<unknown, Promise<number>>();
  /**
   * The rows whose lock it holds, as `table:key` (PostgreSQL keeps a changed row's lock to
   * the end of the transaction): see src/fencing/row-locks.ts.
   */
  readonly heldRows = new Set<string>();

  constructor(dataSource: DataSource, runner: QueryRunner) {
    super(dataSource, runner);
  }
}
