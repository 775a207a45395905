import { DomainError, InputError } from '../common/errors.js';

/** Which limit a refused request broke: the names clients see in `extensions.limit`. */
export type LimitName =
  'queryBytes' | 'nesting' | 'rootFields' | 'fields' | 'depth' | 'cost' | 'responseBytes';

/**
 * A request refused before any resolver ran because it breaks a configured limit:
 * BAD_USER_INPUT with `extensions.limit` (which one) and `extensions.max` (its value).
 */
export class RequestLimitError extends InputError {
  constructor(
    readonly limit: LimitName,
    readonly max: number,
    message: string,
  ) {
    super('BAD_USER_INPUT', message, { limit, max });
  }

  override get extensions() {
    return { code: this.code, limit: this.limit, max: this.max };
  }
}

/** Too many expensive requests are running: RATE_LIMITED {retryAfterSeconds}. */
export class BusyError extends DomainError<'RATE_LIMITED'> {
  constructor(retryAfterSeconds: number, message: string) {
    super('RATE_LIMITED', message, { retryAfterSeconds });
  }
}
