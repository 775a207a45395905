/** R30: what an agent should do after each refusal. Kept free of the service's modules: the stdio bridge (src/cli) uses it too. */
export type Extensions = Record<string, unknown>;

const text = (value: unknown): string =>
  typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? `${value}`
    : value == null
      ? 'unknown'
      : JSON.stringify(value);

/**
 * R30: what the agent should do next, one sentence per code: every code of docs/design.md §6
 * that a tool can meet.
 */
const NEXT_STEP: Record<string, (x: Extensions) => string> = {
  UNAUTHENTICATED: () =>
    'The token is missing, unknown, revoked or expired: stop and ask the operator for a valid planfence token.',
  FORBIDDEN: () =>
    "This token's role or environments do not allow this call: do not retry; ask a human if the work is needed.",
  SELF_APPROVAL: () => 'A plan needs a reviewer other than its author: a human reviews it.',
  ALREADY_APPROVED: () => 'This approval is already recorded: nothing more to do.',
  FROZEN: (x) =>
    `The environment is frozen (${text(x.reason)}, by ${text(x.frozenBy)}): nothing is published until an ADMIN unfreezes it; stop and report.`,
  DEPLOYMENT_ACTIVE: (x) =>
    `Deployment ${text(x.deploymentId)} is ${text(x.status)}: wait until it finishes or a reviewer reconciles it, then start again.`,
  DEPLOYMENT_NOT_ACTIVE: (x) =>
    `This deployment is ${text(x.status)} and no longer yours to report: stop applying it and read the environment's state with list_environments.`,
  RATE_LIMITED: (x) =>
    `Too many calls: wait ${text(x.retryAfterSeconds)} seconds, then repeat the same call (with the same idempotencyKey).`,
  BAD_USER_INPUT: () => 'The input breaks a documented limit: correct it and call again.',
  PAYLOAD_TOO_LARGE: () =>
    'The plan content is larger than the service accepts: submit a smaller plan.',
  NOT_FOUND: () =>
    'Nothing exists under that name or id: check it against list_environments or get_plan.',
  ALREADY_EXISTS: () => 'It exists already: read it instead of creating it.',
  LEASE_HELD: (x) =>
    `${text(x.holder)} holds the lease until ${text(x.expiresAt)}: wait (acquire_lease with waitSeconds) or try later; do not work on this environment without a lease.`,
  LEASE_NOT_HELD: () =>
    'You no longer hold this lease (it expired, was released, or is not yours): stop, acquire a new lease, read the current plan and plan again.',
  STALE_GENERATION: (x) =>
    `A newer generation (${text(x.fence)}) has written, so your generation ${text(x.generation)} is fenced: read the current plan with get_plan, take a new lease and plan again.`,
  UNKNOWN_GENERATION: () =>
    'That generation was not issued to you: use only the generation acquire_lease returned.',
  INVALID_PLAN_STATE: (x) =>
    `The plan is ${text(x.status)} and can no longer be published: read the current plan with get_plan and plan again if work remains.`,
  PRECONDITION_FAILED: (x) =>
    `The current plan is now ${text(x.currentPlanId ?? x.deploymentSequence)}, not the state your call was based on: read it with get_plan and plan again from it.`,
  IDEMPOTENCY_KEY_REUSED: () =>
    'That idempotencyKey was used for a different call: use a new key for a new call.',
  IDEMPOTENCY_IN_PROGRESS: () =>
    'The same call is still being processed: repeat it in a moment with the same idempotencyKey.',
  POLICY_DENIED: (x) =>
    `Policy ${text(x.policy)} refuses this plan (${text(x.message)}): change the plan; a human decides exceptions.`,
  GENERATIONS_EXHAUSTED: () =>
    'This environment has issued its last generation and grants no more leases: tell a human; do not retry.',
  QUEUE_FULL: (x) => `The lease queue is full (${text(x.max)} waiting): try again later.`,
  STORAGE_UNAVAILABLE: () =>
    'The service cannot write right now: repeat the call later with the same idempotencyKey.',
  INTERNAL: () =>
    'The service failed unexpectedly: repeat the call later with the same idempotencyKey, and report it if it persists.',
};

/** The sentence for a code (an unknown code gets a generic one). */
export function nextStep(code: string, extensions: Extensions = {}): string {
  return (
    NEXT_STEP[code]?.(extensions) ?? 'The call was refused: read the current state before acting.'
  );
}

/**
 * What the agent should do after submit_plan accepted its plan. A plan that awaits review
 * names the page where a person decides it (R49): the agent may show it to one; it cannot
 * approve it itself (R29).
 */
export function afterSubmit(plan: {
  id: string;
  status: string;
  reviewUrl: string;
  pendingChecks?: string[];
}): string {
  const checks = plan.pendingChecks?.length
    ? ` Publication also waits for the required checks ${plan.pendingChecks.join(', ')} to report SUCCESS.`
    : '';
  switch (plan.status) {
    case 'PROPOSED':
      return `Plan ${plan.id} awaits review: a person approves or rejects it at ${plan.reviewUrl} (give them this link; no tool approves).${checks} Call wait_for_decision with planId ${plan.id} to learn the decision.`;
    case 'PUBLISHED':
      return `Plan ${plan.id} is published (this environment needs no review; its page: ${plan.reviewUrl}).`;
    default:
      return `Plan ${plan.id} is ${plan.status}: read the current plan with get_plan before acting.`;
  }
}
