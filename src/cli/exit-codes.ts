/**
 * The one table from an answer's error code to the CLI's exit status, used by every command
 * (docs/cli.md lists it). A code missing here exits 8, like a service failure.
 */
export const EXIT_CODES: Record<string, number> = {
  BAD_USER_INPUT: 2,
  PAYLOAD_TOO_LARGE: 2,
  UNAUTHENTICATED: 3,
  FORBIDDEN: 3,
  SELF_APPROVAL: 3,
  ALREADY_APPROVED: 3,
  NOT_FOUND: 4,
  ALREADY_EXISTS: 4,
  STALE_GENERATION: 5,
  UNKNOWN_GENERATION: 5,
  LEASE_HELD: 6,
  LEASE_NOT_HELD: 6,
  QUEUE_FULL: 6,
  GENERATIONS_EXHAUSTED: 6,
  INVALID_PLAN_STATE: 7,
  PRECONDITION_FAILED: 7,
  IDEMPOTENCY_KEY_REUSED: 7,
  IDEMPOTENCY_IN_PROGRESS: 7,
  FROZEN: 7,
  DEPLOYMENT_ACTIVE: 7,
  DEPLOYMENT_NOT_ACTIVE: 7,
  CURSOR_TOO_OLD: 7,
  RATE_LIMITED: 8,
  STORAGE_UNAVAILABLE: 8,
  INTERNAL: 8,
  POLICY_DENIED: 9,
};

/** The exit status for an error code (8 for one the table does not know). */
export function exitCodeOf(code: string): number {
  return EXIT_CODES[code] ?? 8;
}

/**
 * Exit statuses of the Terraform applier (`deploy apply --terraform`, `runner`) that no error
 * code stands for; docs/cli.md lists them with the table.
 */
export const APPLY_EXIT = {
  /** terraform apply failed, or the plan file could not be rendered: the deployment is FAILED. */
  TERRAFORM_FAILED: 9,
  /** R55: the plan file is not the reviewed plan; the deployment is FAILED, terraform apply never ran. */
  NOT_REVIEWED: 10,
  /** The outcome could not be reported: the deployment reads UNKNOWN once its heartbeat lapses (R20). */
  NOT_REPORTED: 11,
} as const;
