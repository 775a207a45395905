import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Logger } from '@nestjs/common';
import type { DataSourceOptions } from 'typeorm';
import { InitialSchema1764400000000 } from '../../migrations/1764400000000-initial-schema.js';
import { PlanPurgedAt1764500000000 } from '../../migrations/1764500000000-plan-purged-at.js';
import { ApprovalPolicies1764600000000 } from '../../migrations/1764600000000-approval-policies.js';
import { StorageIdentity1764610000000 } from '../../migrations/1764610000000-storage-identity.js';
import { AuditEvent } from '../model/audit-event.entity.js';
import { Principal } from '../model/principal.entity.js';
import type { Config } from '../config/config.js';
import { guardedSqliteDriver, StorageStartError } from './sqlite-files.js';
import { sqlitePragmas } from './sqlite-pragmas.js';
import { Deployments1764700000000 } from '../../migrations/1764700000000-deployments.js';
import { ScopedTokens1764800000000 } from '../../migrations/1764800000000-scoped-tokens.js';
import { OutboxWebhooks1764900000000 } from '../../migrations/1764900000000-outbox-webhooks.js';
import { TerraformPlans1765000000000 } from '../../migrations/1765000000000-terraform-plans.js';
import { AuditVia1765100000000 } from '../../migrations/1765100000000-audit-via.js';
import { PlanPolicies1765200000000 } from '../../migrations/1765200000000-plan-policies.js';
import { LeaseQueue1765400000000 } from '../../migrations/1765400000000-lease-queue.js';
import { SubmitInOneStatement1765500000000 } from '../../migrations/1765500000000-submit-in-one-statement.js';
import { WebhookBatches1765600000000 } from '../../migrations/1765600000000-webhook-batches.js';
import { TokenCheck1765700000000 } from '../../migrations/1765700000000-token-check.js';
import { SubmitAtOnce1765800000000 } from '../../migrations/1765800000000-submit-at-once.js';
import { SubmitByIndex1765900000000 } from '../../migrations/1765900000000-submit-by-index.js';
import { SubmitAtOnceById1766000000000 } from '../../migrations/1766000000000-submit-at-once-by-id.js';
import { TerraformState1766100000000 } from '../../migrations/1766100000000-terraform-state.js';
import { Sessions1766200000000 } from '../../migrations/1766200000000-sessions.js';
import { Preconditions1766300000000 } from '../../migrations/1766300000000-preconditions.js';
import { Slack1766400000000 } from '../../migrations/1766400000000-slack.js';
import { ApprovalVia1766500000000 } from '../../migrations/1766500000000-approval-via.js';
import { PlanRowWidth1766600000000 } from '../../migrations/1766600000000-plan-row-width.js';
import { OutboxWithoutEnvironmentIndex1766700000000 } from '../../migrations/1766700000000-outbox-without-environment-index.js';
import { Deployment } from '../model/deployment.entity.js';
import { Environment } from '../model/environment.entity.js';
import { IdempotencyRecord } from '../model/idempotency-record.entity.js';
import { LeaseGrant } from '../model/lease-grant.entity.js';
import { LeaseTicket } from '../model/lease-ticket.entity.js';
import { Plan } from '../model/plan.entity.js';

export const entities = [
  Principal,
  Environment,
  LeaseGrant,
  Plan,
  AuditEvent,
  IdempotencyRecord,
  Deployment,
  LeaseTicket,
];
export const migrations = [
  InitialSchema1764400000000,
  PlanPurgedAt1764500000000,
  ApprovalPolicies1764600000000,
  StorageIdentity1764610000000,
  Deployments1764700000000,
  ScopedTokens1764800000000,
  OutboxWebhooks1764900000000,
  TerraformPlans1765000000000,
  AuditVia1765100000000,
  PlanPolicies1765200000000,
  LeaseQueue1765400000000,
  SubmitInOneStatement1765500000000,
  WebhookBatches1765600000000,
  TokenCheck1765700000000,
  SubmitAtOnce1765800000000,
  SubmitByIndex1765900000000,
  SubmitAtOnceById1766000000000,
  TerraformState1766100000000,
  Sessions1766200000000,
  Preconditions1766300000000,
  Slack1766400000000,
  ApprovalVia1766500000000,
  PlanRowWidth1766600000000,
  OutboxWithoutEnvironmentIndex1766700000000,
];

/**
 * PostgreSQL's answers to a connection that no retry changes: a wrong password or user, a
 * database or role that does not exist (SQLSTATE classes 28 and 3D).
 */
const FINAL_CONNECTION_ERRORS = new Set(['28000', '28P01', '3D000']);

export { WAL_BOUND_PAGES } from './sqlite-pragmas.js';

/** How many times a start tries to connect, and how long it waits between two tries. */
export const CONNECT_ATTEMPTS = 10;
export const CONNECT_RETRY_DELAY_MS = 3000;

/**
 * What a failed connection says, in one line: its message, or (a name that resolves to
 * several addresses) the message of each address's failure.
 */
export function connectionFailure(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const each = error instanceof AggregateError ? error.errors.map(connectionFailure) : [];
  return error.message || [...new Set(each)].join('; ') || error.name;
}

/**
 * The options of the one data source, used by the service and by the migration CLI alike.
 * `toRetry`, `retryAttempts` and `retryDelay` are read by TypeOrmModule: a storage refusal
 * (lock held, database missing) or a PostgreSQL refusal of the credentials or the database
 * is final, not worth the connection retries; a server not answering yet is retried, each
 * failed attempt logged as one warning that names its cause (Nest's own line for it, with
 * its stack trace, is left to the debug level: see PinoNestLogger).
 */
export function dataSourceOptions(config: Config): DataSourceOptions & {
  toRetry: (error: unknown) => boolean;
  retryAttempts: number;
  retryDelay: number;
} {
  const logger = new Logger('Database');
  let attempts = 0;
  const common = {
    toRetry: (error: unknown) => {
      const final =
        error instanceof StorageStartError ||
        FINAL_CONNECTION_ERRORS.has(String((error as { code?: unknown } | null)?.code));
      if (final) return false;
      attempts++;
      logger.warn(
        `could not connect to the database (attempt ${attempts} of ${CONNECT_ATTEMPTS}): ${connectionFailure(error)}` +
          (attempts < CONNECT_ATTEMPTS
            ? `; trying again in ${CONNECT_RETRY_DELAY_MS / 1000} s`
            : ''),
      );
      return true;
    },
    retryAttempts: CONNECT_ATTEMPTS,
    retryDelay: CONNECT_RETRY_DELAY_MS,
    entities,
    migrations,
    synchronize: false,
    migrationsRun: false,
    logging: false,
  } as const;
  const db = config.database;
  if (db.kind === 'postgres') {
    return {
      ...common,
      type: 'postgres',
      url: db.url,
      poolSize: db.poolSize,
      // A transaction's statements that wait for nothing are sent together (Database).
      extra: { pipeline: true },
    };
  }
  const file = db.path !== ':memory:';
  if (file) mkdirSync(dirname(db.path), { recursive: true });
  return {
    ...common,
    type: 'better-sqlite3',
    database: db.path,
    // A file is opened through the storage guard: one process per file, no silent new
    // database where one existed, files readable by their owner only (sqlite-files.ts).
    ...(file ? { driver: guardedSqliteDriver({ initialize: config.storage.initialize }) } : {}),
    enableWAL: file,
    prepareDatabase: (sqlite: { pragma(statement: string): unknown }) => {
      for (const pragma of sqlitePragmas(db)) sqlite.pragma(pragma);
    },
  };
}
