/** Errors a PlanfenceClient throws: one class per `extensions.code` an agent acts on. */

export interface GraphQLErrorBody {
  message: string;
  extensions?: { code?: string } & Record<string, unknown>;
}

/** Any answer the service gave with an error code. */
export class PlanfenceError extends Error {
  readonly code: string;
  readonly extensions: Record<string, unknown>;
  constructor(body: GraphQLErrorBody) {
    super(body.message);
    this.name = new.target.name;
    this.code = body.extensions?.code ?? 'INTERNAL';
    this.extensions = body.extensions ?? {};
  }
}

/** The generation is below the fence: a newer holder has written. Never retried; stop working. */
export class StaleGenerationError extends PlanfenceError {
  get generation(): number {
    return this.extensions.generation as number;
  }
  get fence(): number {
    return this.extensions.fence as number;
  }
}

/** Another holder's lease is live. */
export class LeaseHeldError extends PlanfenceError {
  get holder(): string {
    return this.extensions.holder as string;
  }
  get expiresAt(): Date {
    return new Date(this.extensions.expiresAt as string);
  }
}

/** The lease expired, was released or was superseded. */
export class LeaseNotHeldError extends PlanfenceError {}
/** The generation was never issued to this principal. */
export class UnknownGenerationError extends PlanfenceError {}
/** `basedOnPlanId` is no longer current, or the reviewed content hash differs. */
export class PreconditionFailedError extends PlanfenceError {
  get currentPlanId(): string | null {
    return (this.extensions.currentPlanId as string | null) ?? null;
  }
  /**
   * Which precondition: CURRENT_PLAN, DEPLOYMENT_SEQUENCE, STATE_SERIAL, CONTENT_HASH,
   * PROMOTION or DEPLOY_WINDOW (null from a service older than that).
   */
  get reason(): string | null {
    return (this.extensions.reason as string | null) ?? null;
  }
}
export class InvalidPlanStateError extends PlanfenceError {
  get status(): string {
    return this.extensions.status as string;
  }
}
/**
 * A rate limit or quota of the service was reached; the call had no effect. The client
 * waits `retryAfterSeconds` and sends the same call again (same idempotency key) within
 * its bounds, and throws this when they are exhausted.
 */
export class RateLimitedError extends PlanfenceError {
  get retryAfterSeconds(): number {
    return Number(this.extensions.retryAfterSeconds ?? 1);
  }
}
export class IdempotencyKeyReusedError extends PlanfenceError {}
export class IdempotencyInProgressError extends PlanfenceError {}
export class SelfApprovalError extends PlanfenceError {}
/** This principal has already approved the plan (R14); its approval is recorded once. */
export class AlreadyApprovedError extends PlanfenceError {}
/** The environment is frozen (R17): nothing is published but by an ADMIN's break-glass approval. */
export class FrozenError extends PlanfenceError {
  get reason(): string {
    return this.extensions.reason as string;
  }
  get frozenBy(): string {
    return this.extensions.frozenBy as string;
  }
}
/** Another deployment of the environment is IN_PROGRESS or UNKNOWN (R18, R20). */
export class DeploymentActiveError extends PlanfenceError {
  get deploymentId(): string {
    return this.extensions.deploymentId as string;
  }
  get status(): string {
    return this.extensions.status as string;
  }
}
/** The deployment was finished or reconciled: a late report from its starter (R19, R20). */
export class DeploymentNotActiveError extends PlanfenceError {
  get status(): string {
    return this.extensions.status as string;
  }
}
/** The service's storage takes no writes now; nothing was written. Try again later. */
export class StorageUnavailableError extends PlanfenceError {}
/** A subscription's `after` cursor is followed by more events than the service replays. */
export class CursorTooOldError extends PlanfenceError {
  get replayLimit(): number {
    return Number(this.extensions.replayLimit);
  }
}
export class NotFoundError extends PlanfenceError {}

/** QUEUE_FULL: `max` tickets already wait for the environment's lease. */
export class QueueFullError extends PlanfenceError {
  get max(): number | null {
    return (this.extensions.max as number | undefined) ?? null;
  }
}
/** GENERATIONS_EXHAUSTED: the environment has issued its last generation; no lease can be granted on it. */
export class GenerationsExhaustedError extends PlanfenceError {}
export class AlreadyExistsError extends PlanfenceError {}
export class UnauthenticatedError extends PlanfenceError {}
export class ForbiddenError extends PlanfenceError {}
export class BadUserInputError extends PlanfenceError {}
export class PayloadTooLargeError extends PlanfenceError {}
export class InternalError extends PlanfenceError {}

/** A plan policy refused the submit (DESIGN R35): nothing was stored; retrying the same plan is refused again. */
export class PolicyDeniedError extends PlanfenceError {
  get policy(): string | null {
    return (this.extensions.policy as string | null | undefined) ?? null;
  }
}

/** The service could not be reached, or answered without a GraphQL body (5xx, proxy errors). */
export class TransportError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

const byCode: Record<string, new (body: GraphQLErrorBody) => PlanfenceError> = {
  STALE_GENERATION: StaleGenerationError,
  LEASE_HELD: LeaseHeldError,
  LEASE_NOT_HELD: LeaseNotHeldError,
  UNKNOWN_GENERATION: UnknownGenerationError,
  PRECONDITION_FAILED: PreconditionFailedError,
  INVALID_PLAN_STATE: InvalidPlanStateError,
  RATE_LIMITED: RateLimitedError,
  IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReusedError,
  IDEMPOTENCY_IN_PROGRESS: IdempotencyInProgressError,
  SELF_APPROVAL: SelfApprovalError,
  ALREADY_APPROVED: AlreadyApprovedError,
  FROZEN: FrozenError,
  DEPLOYMENT_ACTIVE: DeploymentActiveError,
  DEPLOYMENT_NOT_ACTIVE: DeploymentNotActiveError,
  STORAGE_UNAVAILABLE: StorageUnavailableError,
  CURSOR_TOO_OLD: CursorTooOldError,
  NOT_FOUND: NotFoundError,
  QUEUE_FULL: QueueFullError,
  GENERATIONS_EXHAUSTED: GenerationsExhaustedError,
  ALREADY_EXISTS: AlreadyExistsError,
  UNAUTHENTICATED: UnauthenticatedError,
  FORBIDDEN: ForbiddenError,
  BAD_USER_INPUT: BadUserInputError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  INTERNAL: InternalError,
  POLICY_DENIED: PolicyDeniedError,
};

export function errorFromBody(body: GraphQLErrorBody): PlanfenceError {
  const type = byCode[body.extensions?.code ?? ''] ?? PlanfenceError;
  return new type(body);
}
