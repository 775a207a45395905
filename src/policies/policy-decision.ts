import type { ApprovalRule } from '../environments/policy.model.js';
import type { EvaluationOutcome } from './policy-engine.js';
import { PolicyEffect, type PlanPolicy, type PolicyResult } from './plan-policy.model.js';

/** What a plan's policies decided (R34, R35), before the deciding transaction. */
export interface PolicyDecision {
  /** The environment's policy version the policies were read at. */
  version: number;
  /** Each policy's result, in the policies' order. */
  results: PolicyResult[];
  /** The first policy that refuses the submit (a DENY that matched, or any policy that failed), if any. */
  denial: { policy: string; message: string } | null;
  /** The approvals the REQUIRE_APPROVAL results add: one rule per group, the largest count. */
  rules: ApprovalRule[];
}

/**
 * R35, fail closed: an expression that failed or ran out of budget counts as matched, and
 * refuses the submit whatever its policy's effect (a policy nobody could evaluate never
 * passes silently).
 */
export function decidePolicies(
  version: number,
  policies: readonly PlanPolicy[],
  outcomes: readonly EvaluationOutcome[],
): PolicyDecision {
  const results = policies.map((policy, i): PolicyResult => {
    const outcome = outcomes[i] ?? { matched: true, error: 'not evaluated' };
    const matched = outcome.error !== null || outcome.matched;
    return {
      policy: policy.name,
      effect: policy.effect,
      matched,
      message: matched ? policy.message : null,
      error: outcome.error,
    };
  });
  let denial: PolicyDecision['denial'] = null;
  for (const result of results) {
    if (result.error !== null) {
      denial = { policy: result.policy, message: `evaluation failed: ${result.error}` };
      break;
    }
    if (result.effect === PolicyEffect.DENY && result.matched) {
      denial = { policy: result.policy, message: result.message ?? '' };
      break;
    }
  }
  const required = policies
    .filter((policy, i) => policy.effect === PolicyEffect.REQUIRE_APPROVAL && results[i].matched)
    .map((policy) => ({ group: policy.group, count: policy.count ?? 1 }));
  return { version, results, denial, rules: mergeRules(required) };
}

/**
 * R14, R35: rules that name the same group are one rule with the largest count (every rule
 * must be met by distinct approvers, so the largest one decides), in the order each group
 * first appears.
 */
export function mergeRules(...lists: readonly (readonly ApprovalRule[])[]): ApprovalRule[] {
  const merged = new Map<string | null, ApprovalRule>();
  for (const rule of lists.flat()) {
    const found = merged.get(rule.group);
    if (!found) merged.set(rule.group, { group: rule.group, count: rule.count });
    else if (rule.count > found.count) found.count = rule.count;
  }
  return [...merged.values()];
}

/** What the audit event of an accepted submit says about its policies. */
export function describeDecision(decision: PolicyDecision): string | undefined {
  if (!decision.results.length) return undefined;
  const warned = decision.results
    .filter((r) => r.effect === PolicyEffect.WARN && r.matched)
    .map((r) => r.policy);
  const parts = [`policy version ${decision.version}`];
  if (warned.length) parts.push(`warned by ${warned.join(', ')}`);
  if (decision.rules.length) {
    parts.push(
      `requires ${decision.rules.map((r) => `${r.group ?? '(any)'}:${r.count}`).join(', ')}`,
    );
  }
  return parts.join('; ');
}
