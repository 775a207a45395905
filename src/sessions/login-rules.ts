import { matchesPattern } from '../auth/scope.js';
import { PRINCIPAL_NAME_PATTERN } from '../auth/dto/token.args.js';
import type { OidcRule } from '../config/oidc-config.js';

type Claims = Record<string, unknown>;

/** A scalar claim as rules read it: strings, numbers and booleans as text. */
function scalar(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}

function matches(actual: string, expected: string): boolean {
  return expected.includes('*') ? matchesPattern(actual, expected) : actual === expected;
}

/**
 * Whether the claim matches `expected` (exactly, or as a `*` glob): a list claim (such as
 * `groups`) matches when one of its elements does (DESIGN §19).
 */
export function claimMatches(claims: Claims, claim: string, expected: string): boolean {
  const value = claims[claim];
  if (Array.isArray(value))
    return value.some((item) => {
      const text = scalar(item);
      return text !== null && matches(text, expected);
    });
  const text = scalar(value);
  return text !== null && matches(text, expected);
}

/** The first rule all of whose claims match, with its index; null when none does. */
export function firstMatchingRule(
  rules: OidcRule[],
  claims: Claims,
): { rule: OidcRule; index: number } | null {
  const index = rules.findIndex((rule) =>
    Object.entries(rule.claims).every(([claim, expected]) => claimMatches(claims, claim, expected)),
  );
  return index < 0 ? null : { rule: rules[index], index };
}

/**
 * The rule's principal name with each `{claim}` replaced by that (scalar) claim's value;
 * an error message when a claim is missing or the name is not a principal name.
 */
export function principalNameOf(
  template: string,
  claims: Claims,
): { name: string } | { problem: string } {
  const missing: string[] = [];
  const name = template.replace(/\{([^{}]+)\}/g, (_, claim: string) => {
    const value = scalar(claims[claim]);
    if (value === null) missing.push(claim);
    return value ?? '';
  });
  if (missing.length)
    return { problem: `the claim "${missing[0]}" that the rule's principal name uses is missing` };
  if (!PRINCIPAL_NAME_PATTERN.test(name))
    return { problem: `"${name}" is not a principal name (the rule's template made it)` };
  return { name };
}
