import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DataSource, type EntityManager, QueryFailedError } from 'typeorm';

/** Thrown inside a write transaction to roll it back and run it again (a lost race, not a client error). */
export class RetryTransaction extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'RetryTransaction';
  }
}

const MAX_ATTEMPTS = 8;

/** Key of the PostgreSQL advisory lock that instances starting together take around migrations. */
const MIGRATION_LOCK = 4_711_2026;

/** Unique violations, serialization failures and deadlocks: the transaction lost a race and can run again. */
function isConflict(error: unknown): boolean {
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

/**
 * The one way the service reaches its database.
 *
 * On SQLite every transaction and every read runs alone, one after the other, on the
 * driver's single connection: TypeORM shares that connection, so concurrent transactions
 * would nest or lose updates, and a read in between would see uncommitted rows.
 * On PostgreSQL each transaction has its own pooled connection and row locks order writers.
 */
@Injectable()
export class Database implements OnModuleInit {
  private readonly logger = new Logger(Database.name);
  private readonly serialized: boolean;
  private tail: Promise<unknown> = Promise.resolve();
  /** Callbacks to run once the transaction of a manager has committed. */
  private readonly committed = new WeakMap<EntityManager, (() => void)[]>();

  constructor(readonly dataSource: DataSource) {
    this.serialized = dataSource.options.type === 'better-sqlite3';
  }

  get dialect(): 'sqlite' | 'postgres' {
    return this.serialized ? 'sqlite' : 'postgres';
  }

  /** Runs pending migrations before anything else touches the database. */
  async onModuleInit(): Promise<void> {
    if (this.serialized) {
      await this.dataSource.runMigrations({ transaction: 'each' });
      return;
    }
    const session = this.dataSource.createQueryRunner();
    await session.connect();
    try {
      await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const applied = await this.dataSource.runMigrations({ transaction: 'each' });
      if (applied.length)
        this.logger.log(`applied migrations: ${applied.map((m) => m.name).join(', ')}`);
    } finally {
      await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await session.release();
    }
  }

  /** Runs `work` in one transaction; commits when it resolves, rolls back when it throws. */
  async write<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.exclusive(async () => {
          const callbacks: (() => void)[] = [];
          const result = await this.dataSource.transaction((manager) => {
            this.committed.set(manager, callbacks);
            return work(manager);
          });
          // After the commit, before the next transaction (on SQLite): in commit order.
          for (const callback of callbacks) callback();
          return result;
        });
      } catch (error) {
        if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        this.logger.debug(`transaction conflict, attempt ${attempt}: ${(error as Error).message}`);
        // Back off a little, with jitter, so that conflicting writers do not meet again at once.
        if (!this.serialized)
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
      }
    }
  }

  /** Runs `callback` after the transaction of `manager` commits; never if it rolls back. */
  afterCommit(manager: EntityManager, callback: () => void): void {
    const callbacks = this.committed.get(manager);
    if (!callbacks) throw new Error('afterCommit() needs a manager of Database.write()');
    callbacks.push(callback);
  }

  /** Reads committed state only. */
  read<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.exclusive(() => work(this.dataSource.manager));
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (!this.serialized) return work();
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/** Runs a conditional statement (named `:parameters`); the affected-row count is the decision. */
export async function execute(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<number> {
  const [query, values] = manager.connection.driver.escapeQueryWithParameters(sql, parameters);
  if (!manager.queryRunner) throw new Error('execute() needs a transaction manager');
  const result = await manager.queryRunner.query(query, values, true);
  return result.affected ?? 0;
}

/** Runs a query (named `:parameters`) and returns its rows. */
export async function select<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<R[]> {
  const [query, values] = manager.connection.driver.escapeQueryWithParameters(sql, parameters);
  return manager.query<R[]>(query, values);
}
