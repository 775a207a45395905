import { DomainError } from '../common/errors.js';

/** The rejections of plan policies (DESIGN §6, §16). */
export const PolicyErrorCode = {
  POLICY_DENIED: 'POLICY_DENIED',
  BAD_USER_INPUT: 'BAD_USER_INPUT',
} as const;
export type PolicyErrorCode = (typeof PolicyErrorCode)[keyof typeof PolicyErrorCode];

export class PolicyError extends DomainError<PolicyErrorCode> {
  /** R35: the submit is refused by `policy` (a DENY that matched, or a policy that failed). */
  static denied(policy: string, message: string): PolicyError {
    return new PolicyError('POLICY_DENIED', `denied by policy ${policy}: ${message}`, {
      policy,
      message,
    });
  }

  /** A policy that cannot be saved or tried: `error` says why (with the position for CEL). */
  static invalid(policy: string | null, error: string): PolicyError {
    return new PolicyError(
      'BAD_USER_INPUT',
      policy === null ? error : `policy ${policy}: ${error}`,
      { policy, error },
    );
  }
}
