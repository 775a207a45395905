import type { EntityManager } from 'typeorm';

/**
 * The service's one clock (R11). Lease liveness (acquire, renew, STRICT submit)
 * is judged by it and never by a timestamp an agent sends. Tests replace it.
 */
export abstract class Clock {
  /**
   * Milliseconds since the epoch. Inside a transaction, pass its manager: a clock that
   * asks the database then uses the transaction's own connection.
   */
  abstract now(manager?: EntityManager): Promise<number>;

  /**
   * Whether this clock is the database's (DATABASE_NOW): a statement may then read it
   * itself instead of being given the time.
   */
  readonly inDatabase: boolean = false;
}

/** PostgreSQL's clock in milliseconds since the epoch, as a SQL expression. */
export const DATABASE_NOW = 'floor(extract(epoch from clock_timestamp()) * 1000)';

export class SystemClock extends Clock {
  now(): Promise<number> {
    return Promise.resolve(Date.now());
  }
}

/** A clock that moves only when told to: lets tests expire leases without sleeping. */
export class ManualClock extends Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {
    super();
  }
  now(): Promise<number> {
    return Promise.resolve(this.current);
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

/**
 * PostgreSQL's clock: several instances judge lease liveness by one clock, whatever
 * their own clocks say.
 */
export class DatabaseClock extends Clock {
  override readonly inDatabase = true;

  constructor(private readonly outside: EntityManager) {
    super();
  }
  async now(manager?: EntityManager): Promise<number> {
    // Never a second pooled connection from inside a transaction: a full pool would wait on itself.
    const [row] = await (manager ?? this.outside).query<{ now: string | number }[]>(
      `SELECT ${DATABASE_NOW} AS now`,
    );
    return Number(row.now);
  }
}
