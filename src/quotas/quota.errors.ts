import { DomainError } from '../common/errors.js';

export type QuotaErrorCode = 'RATE_LIMITED';

/** A limit of this instance was reached; `retryAfterSeconds` says when the same call fits again. */
export class QuotaError extends DomainError<QuotaErrorCode> {
  static rateLimited(limit: string, retryAfterSeconds: number): QuotaError {
    return new QuotaError(
      'RATE_LIMITED',
      `rate limited: ${limit}; retry in ${retryAfterSeconds} s`,
      { retryAfterSeconds },
    );
  }
}
