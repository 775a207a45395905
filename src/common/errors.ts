/**
 * Every error a client can see carries one of these codes in `extensions.code`.
 * Each feature owns a subset (see its `*.errors.ts`); `common/error-formatter.ts`
 * is the one place that turns them into GraphQL errors.
 */
export const ERROR_CODES = [
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'SELF_APPROVAL',
  'ALREADY_APPROVED',
  'FROZEN',
  'DEPLOYMENT_ACTIVE',
  'DEPLOYMENT_NOT_ACTIVE',
  'RATE_LIMITED',
  'BAD_USER_INPUT',
  'PAYLOAD_TOO_LARGE',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'LEASE_HELD',
  'LEASE_NOT_HELD',
  'STALE_GENERATION',
  'UNKNOWN_GENERATION',
  'INVALID_PLAN_STATE',
  'PRECONDITION_FAILED',
  'IDEMPOTENCY_KEY_REUSED',
  'IDEMPOTENCY_IN_PROGRESS',
  'STORAGE_UNAVAILABLE',
  'CURSOR_TOO_OLD',
  'POLICY_DENIED',
  'QUEUE_FULL',
  'GENERATIONS_EXHAUSTED',
  'INTERNAL',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export type ErrorDetails = Record<string, string | number | null>;

type Extensions = { code: ErrorCode } & Record<string, unknown>;

/** Which details of each rejection reach the client (docs/design.md §6): the one mapping from codes to `extensions`. */
export function extensionsOf(error: DomainError): Extensions {
  const { code, details } = error;
  switch (code) {
    case 'LEASE_HELD':
      // queueLength only while lease tickets wait (R38).
      return details.queueLength === undefined
        ? { code, holder: details.holder, expiresAt: details.expiresAt }
        : {
            code,
            holder: details.holder,
            expiresAt: details.expiresAt,
            queueLength: details.queueLength,
          };
    case 'QUEUE_FULL':
      return { code, max: details.max ?? null };
    case 'GENERATIONS_EXHAUSTED':
      return { code, lastIssuedGeneration: details.lastIssuedGeneration };
    case 'STALE_GENERATION':
      return { code, generation: details.generation, fence: details.fence };
    case 'INVALID_PLAN_STATE':
      return { code, status: details.status };
    case 'PRECONDITION_FAILED':
      // reason (DESIGN §6): CURRENT_PLAN, DEPLOYMENT_SEQUENCE, STATE_SERIAL, CONTENT_HASH,
      // PROMOTION or DEPLOY_WINDOW.
      // deploymentSequence: R33, a plan made against a deployment sequence that has moved on.
      return {
        code,
        reason: details.reason ?? null,
        currentPlanId: details.currentPlanId ?? null,
        ...('deploymentSequence' in details
          ? { deploymentSequence: details.deploymentSequence }
          : {}),
        // R56: a plan computed from a Terraform state older than the one last reported.
        ...('stateSerial' in details
          ? {
              priorStateSerial: details.priorStateSerial ?? null,
              stateSerial: details.stateSerial,
              lineage: details.lineage ?? null,
            }
          : {}),
        // R51: the environment a plan must have succeeded in first, and the plan's revision.
        ...(details.reason === 'PROMOTION'
          ? { from: details.from ?? null, sourceRevision: details.sourceRevision ?? null }
          : {}),
        // R52: when the published plan had to start deploying by.
        ...('deployBy' in details ? { deployBy: details.deployBy } : {}),
        // An approval whose --hash is not the plan's: the hash the plan has, and the one given.
        ...('expectedContentHash' in details
          ? {
              expectedContentHash: details.expectedContentHash,
              reviewedContentHash: details.reviewedContentHash ?? null,
            }
          : {}),
      };
    case 'FROZEN':
      return { code, reason: details.reason ?? null, frozenBy: details.frozenBy ?? null };
    case 'DEPLOYMENT_ACTIVE':
      return { code, deploymentId: details.deploymentId ?? null, status: details.status ?? null };
    case 'DEPLOYMENT_NOT_ACTIVE':
      return { code, status: details.status ?? null };
    case 'RATE_LIMITED':
      return { code, retryAfterSeconds: details.retryAfterSeconds ?? null };
    case 'CURSOR_TOO_OLD':
      return { code, replayLimit: details.replayLimit ?? null };
    case 'POLICY_DENIED':
      return { code, policy: details.policy ?? null, message: details.message ?? null };
    case 'BAD_USER_INPUT':
      // A plan policy that cannot be saved names itself and what is wrong (DESIGN §16); an
      // input over a limit (a Terraform document over its budget) names the limit and its value.
      return 'error' in details
        ? { code, policy: details.policy ?? null, error: details.error }
        : 'limit' in details
          ? { code, limit: details.limit, max: details.max ?? null }
          : { code };
    case 'UNAUTHENTICATED':
    case 'FORBIDDEN':
    case 'SELF_APPROVAL':
    case 'ALREADY_APPROVED':
    case 'PAYLOAD_TOO_LARGE':
    case 'NOT_FOUND':
    case 'ALREADY_EXISTS':
    case 'LEASE_NOT_HELD':
    case 'UNKNOWN_GENERATION':
    case 'IDEMPOTENCY_KEY_REUSED':
    case 'IDEMPOTENCY_IN_PROGRESS':
    case 'STORAGE_UNAVAILABLE':
    case 'INTERNAL':
      return { code };
    default: {
      const unhandled: never = code;
      throw new Error(`no GraphQL mapping for error code ${String(unhandled)}`);
    }
  }
}

/**
 * A rejection the client caused and can act on; never carries SQL or a stack. It captures no
 * stack either: a refusal is an outcome, not a fault, and graphql-js reads the stack of every
 * error it wraps, which made formatting one cost more than deciding the refusal.
 */
export abstract class DomainError<C extends ErrorCode = ErrorCode> extends Error {
  readonly code: C;
  readonly details: ErrorDetails;

  constructor(code: C, message: string, details: ErrorDetails = {}) {
    const depth = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = depth;
    this.code = code;
    this.details = details;
    this.name = new.target.name;
  }

  /** graphql-js copies these into the GraphQL error wherever it wraps this one (subscriptions too). */
  get extensions(): Extensions {
    return extensionsOf(this);
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

/** Input that breaks a documented limit (docs/design.md §6). */
export class InputError extends DomainError<InputErrorCode> {}

/** An error read back from an idempotency record: the first outcome, replayed as it was. */
export class ReplayedError extends DomainError {}
