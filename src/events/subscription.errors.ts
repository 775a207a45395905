import { DomainError } from '../common/errors.js';

export const SubscriptionErrorCode = {
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  CURSOR_TOO_OLD: 'CURSOR_TOO_OLD',
} as const;
export type SubscriptionErrorCode =
  (typeof SubscriptionErrorCode)[keyof typeof SubscriptionErrorCode];

/**
 * A subscription's cursor (`after`) that cannot be resumed: not of the subscribed environment
 * (BAD_USER_INPUT), or followed by more events than PLANFENCE_SUBSCRIPTION_REPLAY_LIMIT
 * (CURSOR_TOO_OLD {replayLimit}: read the current state, then subscribe without `after`).
 */
export class SubscriptionError extends DomainError<SubscriptionErrorCode> {}
