import { DomainError } from '../common/errors.js';

/** The rejections the guard decides (docs/design.md §3, §6, §9). */
export const FenceErrorCode = {
  NOT_FOUND: 'NOT_FOUND',
  LEASE_HELD: 'LEASE_HELD',
  LEASE_NOT_HELD: 'LEASE_NOT_HELD',
  STALE_GENERATION: 'STALE_GENERATION',
  UNKNOWN_GENERATION: 'UNKNOWN_GENERATION',
  INVALID_PLAN_STATE: 'INVALID_PLAN_STATE',
  PRECONDITION_FAILED: 'PRECONDITION_FAILED',
  SELF_APPROVAL: 'SELF_APPROVAL',
  ALREADY_APPROVED: 'ALREADY_APPROVED',
  FROZEN: 'FROZEN',
  GENERATIONS_EXHAUSTED: 'GENERATIONS_EXHAUSTED',
} as const;
export type FenceErrorCode = (typeof FenceErrorCode)[keyof typeof FenceErrorCode];

export class FenceError extends DomainError<FenceErrorCode> {}

/**
 * R34: the environment's plan policies changed after the plan's were evaluated. Not a
 * rejection: the transaction rolls back and the caller evaluates again.
 */
export class PolicyVersionChanged extends Error {
  constructor(environment: string) {
    super(`the plan policies of "${environment}" changed during the decision`);
    this.name = 'PolicyVersionChanged';
  }
}
