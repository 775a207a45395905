import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/config.js';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { migrate } from '../../src/database/migrator.js';
import { Transaction } from '../../src/database/transaction.js';
import { DecisionTx, type Effect } from '../../src/fencing/effects.js';
import type { PlanWrites } from '../../src/fencing/plan-writes.js';
import { PlanContentType } from '../../src/model/plan.entity.js';

/**
 * The service's data source on `url`, initialized and migrated, without the service: for
 * suites that hand the guard's writes a transaction of their own. Nest's logger is silenced.
 */
export async function migratedDataSource(url: string): Promise<DataSource> {
  Logger.overrideLogger(false);
  const config = loadConfig({
    DATABASE_URL: url,
    PLANFENCE_ADMIN_TOKEN: 'pf_admin_token_for_guard_tests_0123456789',
  });
  const dataSource = new DataSource(dataSourceOptions(config));
  await dataSource.initialize();
  await migrate(dataSource, new Logger('migrations'));
  return dataSource;
}

/** A guard's refusal (its code), or any other error a write threw. */
type Thrown = Error & { code?: string };

/** What a decision came to: its write's result, or the error it threw, and its effects. */
export interface Decided<T> {
  result: T | null;
  error: Thrown | null;
  effects: Effect[];
}

/**
 * One decision on `dataSource` at `now`: `write` in a transaction of its own, committed unless
 * it throws (then rolled back, and its error returned).
 */
export async function decideOn<T>(
  dataSource: DataSource,
  now: number,
  write: (tx: DecisionTx) => Promise<T>,
): Promise<Decided<T>> {
  const runner = dataSource.createQueryRunner();
  await runner.startTransaction();
  const tx = new DecisionTx(new Transaction(dataSource, runner), now);
  try {
    const result = await write(tx);
    await runner.commitTransaction();
    return { result, error: null, effects: tx.effects };
  } catch (error) {
    await runner.rollbackTransaction();
    return { result: null, error: error as Thrown, effects: tx.effects };
  } finally {
    await runner.release();
  }
}

/** What a submit asks the guard (PlanWrites.admitPlan), but for its clock. */
export type SubmitRequest = Omit<Parameters<PlanWrites['admitPlan']>[1], 'now'>;

/**
 * A plain TEXT submit of `content` by `principal` at `generation`, with no title, base,
 * artifact, state or policy results (policy version 0); `extra` sets any other field.
 */
export function submitRequest(
  environment: string,
  principal: string,
  generation: number,
  content: string,
  extra: Partial<SubmitRequest> = {},
): SubmitRequest {
  return {
    environment,
    principal,
    generation,
    content,
    contentHash: createHash('sha256').update(content).digest('hex'),
    title: null,
    basedOnPlanId: null,
    contentType: PlanContentType.TEXT,
    summary: null,
    artifact: null,
    artifactHash: null,
    basedOnDeploymentSequence: null,
    priorState: null,
    sourceRevision: null,
    policy: { version: 0, results: [], denial: null, rules: [] },
    ...extra,
  };
}
