/**
 * Every error a client can see carries one of these codes in `extensions.code`.
 * Each feature owns a subset (see its `*.errors.ts`); `common/error-formatter.ts`
 * is the one place that turns them into GraphQL errors.
 */
export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'SELF_APPROVAL'
  | 'BAD_USER_INPUT'
  | 'PAYLOAD_TOO_LARGE'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'LEASE_HELD'
  | 'LEASE_NOT_HELD'
  | 'STALE_GENERATION'
  | 'UNKNOWN_GENERATION'
  | 'INVALID_PLAN_STATE'
  | 'PRECONDITION_FAILED'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'IDEMPOTENCY_IN_PROGRESS'
  | 'INTERNAL';

export type ErrorDetails = Record<string, string | number | null>;

/** A rejection the client caused and can act on; never carries SQL or a stack. */
export abstract class DomainError<C extends ErrorCode = ErrorCode> extends Error {
  constructor(
    readonly code: C,
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** `instanceof DomainError`, typed with the code union. */
export function isDomainError(error: unknown): error is DomainError {
  return error instanceof DomainError;
}

export const InputErrorCode = {
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
} as const;
export type InputErrorCode = (typeof InputErrorCode)[keyof typeof InputErrorCode];

/** Input that breaks a documented limit (DESIGN §6). */
export class InputError extends DomainError<InputErrorCode> {}

/** An error read back from an idempotency record: the first outcome, replayed as it was. */
export class ReplayedError extends DomainError {}
