/**
 * R26: environment name patterns. `*` matches any run of characters; everything else
 * matches itself. A principal without patterns (null) may act on every environment.
 */
import { DeploymentId, PlanId } from '../common/ids.js';

/**
 * Whether `name` matches `pattern`, in time linear in their lengths (no regular expression,
 * no backtracking): the text before the first `*` must start the name, the text after the
 * last must end it, and each part between is taken at its leftmost place after the
 * previous one (leftmost is always right when `*` is the only wildcard).
 */
export function matchesPattern(name: string, pattern: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return name === pattern;
  const first = parts[0];
  const last = parts[parts.length - 1];
  if (first.length + last.length > name.length) return false;
  if (!name.startsWith(first) || !name.endsWith(last)) return false;
  let at = first.length;
  const end = name.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i];
    if (!part) continue;
    const found = name.indexOf(part, at);
    if (found < 0 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}

/** Whether a principal limited to `patterns` (null: unlimited) may act on `environment`. */
export function allowsEnvironment(
  patterns: string[] | null | undefined,
  environment: string,
): boolean {
  return (
    !Array.isArray(patterns) || patterns.some((pattern) => matchesPattern(environment, pattern))
  );
}

/**
 * The environments a GraphQL operation acts on, read from its arguments: `environment`
 * (top level or in `input`), the environment part of `planId` / `deploymentId`, and the id
 * or name argument of the operations that address one plan, deployment or environment by it.
 * Every environment-scoped operation of the schema names its environment one of these ways.
 */
export function environmentsOfOperation(handler: string, args: Record<string, unknown>): string[] {
  const found = new Set<string>();
  const take = (value: unknown, pick: (text: string) => string | null = (text) => text) => {
    if (typeof value !== 'string') return;
    const environment = pick(value);
    if (environment) found.add(environment);
  };
  for (const source of [args, args.input as Record<string, unknown> | undefined]) {
    if (!source || typeof source !== 'object') continue;
    take(source.environment);
    take(source.planId, PlanId.environmentOf);
    take(source.deploymentId, DeploymentId.environmentOf);
  }
  if (handler === 'plan') take(args.id, PlanId.environmentOf);
  if (handler === 'deployment') take(args.id, DeploymentId.environmentOf);
  if (handler === 'environment') take(args.name);
  if (handler === 'createEnvironment') take((args.input as { name?: unknown } | undefined)?.name);
  return [...found];
}
