import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { DomainError, type ErrorCode, type ErrorDetails, ReplayedError } from '../common/errors.js';
import { canonicalSha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { execute } from '../database/database.js';
import { IdempotencyRecord } from '../model/idempotency-record.entity.js';
import { IdempotencyError } from './idempotency.errors.js';
import { findOne, insertRowLater } from '../database/rows.js';

export interface IdempotentCall {
  principal: string;
  key: string;
  operation: string;
  /** Hash of the operation and its canonical input. */
  fingerprint: string;
}

export function idempotentCall(
  principal: string,
  key: string,
  operation: string,
  input: object,
): IdempotentCall {
  return { principal, key, operation, fingerprint: canonicalSha256({ operation, input }) };
}

/** The first outcome of a call, as it is replayed. */
export type RememberedOutcome =
  { planId: string } | { deploymentId: string } | { error: DomainError };

/**
 * R9. Records live in the decision's own transaction: the record and the effect commit
 * together or not at all, and the (principal, key) primary key lets only one of several
 * concurrent duplicates commit; the others run again and replay it.
 */
@Injectable()
export class IdempotencyService {
  constructor(@Inject(CONFIG) private readonly config: Config) {}

  /** How long a record is kept: its expiresAt is its createdAt plus this. */
  get ttlMs(): number {
    return this.config.idempotencyTtlMs;
  }

  /** The first outcome of this call, or null when the key is new (or its record expired). */
  async recall(
    m: EntityManager,
    call: IdempotentCall,
    now: number,
  ): Promise<RememberedOutcome | null> {
    const record = await findOne(m, IdempotencyRecord, {
      principal: call.principal,
      key: call.key,
    });
    if (!record) return null;
    if (record.expiresAt <= now) {
      await execute(
        m,
        'DELETE FROM idempotency_records WHERE principal = :principal AND idempotency_key = :key AND expires_at <= :now',
        {
          ...call,
          now,
        },
      );
      return null;
    }
    if (record.fingerprint !== call.fingerprint) {
      throw new IdempotencyError(
        'IDEMPOTENCY_KEY_REUSED',
        record.operation === call.operation
          ? `idempotency key "${call.key}" was already used for a different ${call.operation} input`
          : `idempotency key "${call.key}" was already used for ${record.operation}`,
      );
    }
    if (record.planId != null) return { planId: record.planId };
    if (record.deploymentId != null) return { deploymentId: record.deploymentId };
    // Written in its effect's transaction, a record holds a plan, a deployment or an error:
    // a concurrent duplicate waits for the first to commit and replays it, so
    // IDEMPOTENCY_IN_PROGRESS (which R9 allows, and clients know) is never answered.
    const details = JSON.parse(record.errorDetails ?? '{}') as ErrorDetails;
    return {
      error: new ReplayedError(record.errorCode as ErrorCode, record.errorMessage!, details),
    };
  }

  async remember(
    m: EntityManager,
    call: IdempotentCall,
    now: number,
    outcome: RememberedOutcome,
  ): Promise<void> {
    const error = 'error' in outcome ? outcome.error : null;
    await insertRowLater(m, IdempotencyRecord, {
      principal: call.principal,
      key: call.key,
      operation: call.operation,
      fingerprint: call.fingerprint,
      planId: 'planId' in outcome ? outcome.planId : null,
      deploymentId: 'deploymentId' in outcome ? outcome.deploymentId : null,
      errorCode: error?.code ?? null,
      errorMessage: error?.message ?? null,
      errorDetails: error ? JSON.stringify(error.details) : null,
      createdAt: now,
      expiresAt: now + this.ttlMs,
    });
  }
}
