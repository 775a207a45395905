/**
 * The environment's row lock (src/fencing/row-locks.ts) on a real database, without the
 * service: a transaction that changed an environment's row, or took it, holds it to its end,
 * and takes it again only for another environment. On PostgreSQL another transaction waits
 * for a held row (tried here with NOWAIT, which refuses at once instead of waiting).
 *
 * Mutation runs are SQLite-only; there this file runs its PostgreSQL cases too when
 * PLANFENCE_TEST_POSTGRES_URL names a server, since the lock's code is PostgreSQL's.
 */
import type { DataSource, QueryRunner } from 'typeorm';
import { Transaction } from '../src/database/transaction.js';
import { EnvironmentWrites } from '../src/fencing/environment-writes.js';
import { ensureEnvironmentRowHeld, takeEnvironmentRow } from '../src/fencing/row-locks.js';
import { FencingMode } from '../src/model/environment.entity.js';
import { scratchDatabase, TEST_DATABASE } from './support/app.js';
import { decideOn, migratedDataSource } from './support/guard-database.js';

const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
const inMutationRun = Boolean((globalThis as { __planfenceInRealm?: boolean }).__planfenceInRealm);
const databases: ('sqlite' | 'postgres')[] = inMutationRun
  ? ['sqlite', ...(server ? (['postgres'] as const) : [])]
  : [TEST_DATABASE];

describe.each(databases)('on %s', (dialect) => {
  let dataSource: DataSource;
  let dropDatabase = () => Promise.resolve();

  beforeAll(async () => {
    let url = 'sqlite::memory:';
    if (dialect === 'postgres') {
      const database = await scratchDatabase(true, 'postgres');
      url = database.url;
      dropDatabase = database.cleanup;
    }
    dataSource = await migratedDataSource(url);
    const created = await decideOn(dataSource, 1_000, async (tx) => {
      for (const name of ['dev', 'prod'])
        await new EnvironmentWrites().createEnvironment(tx, {
          name,
          mode: FencingMode.MONOTONIC,
          requireApproval: false,
          approvalRules: [],
          proposalTtlSeconds: null,
          now: 1_000,
        });
    });
    expect(created.error).toBeNull();
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await dropDatabase();
  });

  /** Runs `body` in a transaction of its own, rolled back at the end; `sent` lists the texts it sent through the query runner. */
  async function inTransaction(
    body: (m: Transaction, sent: string[]) => Promise<void>,
  ): Promise<void> {
    const runner = dataSource.createQueryRunner();
    await runner.startTransaction();
    const sent: string[] = [];
    const query: (text: string, parameters?: unknown[], structured?: boolean) => Promise<unknown> =
      runner.query.bind(runner);
    runner.query = ((text: string, parameters?: unknown[], structured?: boolean) => {
      sent.push(text);
      return query(text, parameters, structured);
    }) as QueryRunner['query'];
    try {
      await body(new Transaction(dataSource, runner), sent);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  }

  test('taking an environment row says whether the environment exists', async () => {
    await inTransaction(async (m) => {
      expect(await takeEnvironmentRow(m, 'dev')).toBe(true);
      expect(await takeEnvironmentRow(m, 'staging')).toBe(false);
    });
  });

  if (dialect !== 'postgres') return;

  /** Whether another transaction could take `environment`'s row now (without waiting for it). */
  async function free(environment: string): Promise<boolean> {
    const other = dataSource.createQueryRunner();
    await other.connect();
    try {
      await other.query('SELECT name FROM environments WHERE name = $1 FOR UPDATE NOWAIT', [
        environment,
      ]);
      return true;
    } catch (error) {
      // 55P03, lock_not_available: the row is held.
      if ((error as { driverError?: { code?: string } }).driverError?.code === '55P03')
        return false;
      throw error;
    } finally {
      await other.release();
    }
  }

  test('a transaction that took a row holds it to its end, and takes it only once', async () => {
    await inTransaction(async (m, sent) => {
      expect(await free('dev')).toBe(true);
      await ensureEnvironmentRowHeld(m, 'dev');
      expect(await free('dev')).toBe(false);
      expect(await free('prod')).toBe(true);
      await ensureEnvironmentRowHeld(m, 'dev');
      expect(sent.filter((text) => text.includes('FOR UPDATE'))).toHaveLength(1);
    });
    expect(await free('dev')).toBe(true);
  });

  test('a transaction that changed a row does not lock it again, but still locks another environment', async () => {
    await inTransaction(async (m, sent) => {
      expect(await takeEnvironmentRow(m, 'dev')).toBe(true);
      expect(await free('dev')).toBe(false);
      await ensureEnvironmentRowHeld(m, 'dev');
      expect(sent.filter((text) => text.includes('FOR UPDATE'))).toHaveLength(0);
      expect(await free('prod')).toBe(true);
      await ensureEnvironmentRowHeld(m, 'prod');
      expect(await free('prod')).toBe(false);
      expect(sent.filter((text) => text.includes('FOR UPDATE'))).toHaveLength(1);
    });
  });

  test('a row the transaction failed to take (no such environment) is not counted as held', async () => {
    await inTransaction(async (m, sent) => {
      expect(await takeEnvironmentRow(m, 'staging')).toBe(false);
      await ensureEnvironmentRowHeld(m, 'staging');
      expect(sent.filter((text) => text.includes('FOR UPDATE'))).toHaveLength(1);
    });
  });
});
