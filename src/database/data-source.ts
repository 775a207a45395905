import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import { InitialSchema1764400000000 } from '../../migrations/1764400000000-initial-schema.js';
import { PlanPurgedAt1764500000000 } from '../../migrations/1764500000000-plan-purged-at.js';
import { Deployments1764700000000 } from '../../migrations/1764700000000-deployments.js';
import { AuditEvent } from '../audit/audit-event.entity.js';
import { Principal } from '../auth/principal.entity.js';
import type { Config } from '../config/config.js';
import { Deployment } from '../deployments/deployment.entity.js';
import { Environment } from '../environments/environment.entity.js';
import { IdempotencyRecord } from '../idempotency/idempotency-record.entity.js';
import { LeaseGrant } from '../leases/lease-grant.entity.js';
import { Plan } from '../plans/plan.entity.js';

export const entities = [
  Principal,
  Environment,
  LeaseGrant,
  Plan,
  AuditEvent,
  IdempotencyRecord,
  Deployment,
];
export const migrations = [
  InitialSchema1764400000000,
  PlanPurgedAt1764500000000,
  Deployments1764700000000,
];

/** The options of the one data source, used by the service and by the migration CLI alike. */
export function dataSourceOptions(config: Config): DataSourceOptions {
  const common = {
    entities,
    migrations,
    synchronize: false,
    migrationsRun: true,
    logging: false,
  } as const;
  const db = config.database;
  if (db.kind === 'postgres') {
    return { ...common, type: 'postgres', url: db.url, poolSize: db.poolSize };
  }
  if (db.path !== ':memory:') mkdirSync(dirname(db.path), { recursive: true });
  return {
    ...common,
    type: 'better-sqlite3',
    database: db.path,
    enableWAL: db.path !== ':memory:',
    prepareDatabase: (sqlite: { pragma(statement: string): unknown }) => {
      // FULL fsyncs every commit: an acknowledged grant or publication survives power loss.
      sqlite.pragma(`synchronous = ${db.synchronous}`);
    },
  };
}
