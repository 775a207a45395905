import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/config.js';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { migrate } from '../../src/database/migrator.js';
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
