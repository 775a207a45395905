import { parseYaml } from './yaml.js';
import type { ApprovalRule, EnvironmentPolicy, PlanPolicy } from '../../client/client.js';
import {
  type Command,
  integer,
  notFound,
  pending,
  planRow,
  readInput,
  table,
  UsageError,
} from '../command.js';

/** Exit code of `policy test` when a policy would refuse the plan (as for POLICY_DENIED). */
export const DENIED_EXIT = 9;

/**
 * A policy file: YAML (or JSON) holding a list of policies, or `planPolicies:` with one.
 * Each is {name, expression, effect, message, group?, count?}, as docs/policies.md shows.
 */
export function readPolicyFile(path: string): PlanPolicy[] {
  const text = readInput(path, 'policy file');
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    throw new UsageError(`${path} is not YAML: ${(error as Error).message}`);
  }
  const list: unknown =
    parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as { planPolicies?: unknown }).planPolicies
      : (parsed ?? []);
  if (!Array.isArray(list)) throw new UsageError(`${path} must hold a list of policies`);
  return list.map((item: unknown, i) => {
    if (!item || typeof item !== 'object')
      throw new UsageError(`${path}: policy #${i + 1} is not a mapping`);
    const { name, expression, effect, message, group, count } = item as Record<string, unknown>;
    if (typeof name !== 'string' || typeof expression !== 'string' || typeof message !== 'string') {
      throw new UsageError(`${path}: policy #${i + 1} needs name, expression and message as text`);
    }
    if (effect !== 'DENY' && effect !== 'WARN' && effect !== 'REQUIRE_APPROVAL') {
      throw new UsageError(`${path}: policy ${name} needs effect DENY, WARN or REQUIRE_APPROVAL`);
    }
    return {
      name,
      expression: expression.trim(),
      effect,
      message,
      ...(group !== undefined ? { group: typeof group === 'string' ? group : null } : {}),
      ...(count !== undefined ? { count: Number(count) } : {}),
    };
  });
}

/** `GROUP:COUNT`; `*:COUNT` (or a bare COUNT) for a rule any approver counts toward. */
function rule(text: string): ApprovalRule {
  const match = /^(?:([^:]+):)?(\d+)$/.exec(text);
  if (!match) throw new UsageError(`--rule must be GROUP:COUNT (got ${text})`);
  const group = match[1] === undefined || match[1] === '*' ? null : match[1];
  return { group, count: Number(match[2]) };
}

const describe = (policy: EnvironmentPolicy) =>
  [
    `environment  ${policy.name}`,
    `rules        ${pending(policy.approvalRules)}`,
    `proposal ttl ${policy.proposalTtlSeconds == null ? 'none' : `${policy.proposalTtlSeconds} s`}`,
    `freeze       ${policy.freeze ? `by ${policy.freeze.frozenBy} since ${policy.freeze.frozenAt}: ${policy.freeze.reason}` : 'none'}`,
    `policies     ${policy.planPolicies.length ? policy.planPolicies.map((p) => `${p.name} (${p.effect}${p.effect === 'REQUIRE_APPROVAL' ? ` ${p.group ?? '*'}:${p.count}` : ''})`).join(', ') : 'none'} (version ${policy.policyVersion})`,
  ].join('\n');

/**
 * planfence env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none] [--policy-file PATH]:
 * shows, or changes (ADMIN). The policy file replaces the plan policies.
 */
export const environmentPolicy: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none] [--policy-file PATH]');
  const planPolicies = values['policy-file'] ? readPolicyFile(values['policy-file']) : undefined;
  const rules = values.rule?.map(rule);
  const ttl =
    values.ttl === undefined
      ? undefined
      : values.ttl === 'none'
        ? null
        : integer(values.ttl, '--ttl');
  const policy =
    rules || ttl !== undefined || planPolicies
      ? await client.updateEnvironmentPolicy({
          environment: rest[0],
          approvalRules: rules,
          proposalTtlSeconds: ttl,
          planPolicies,
        })
      : await client.policy(rest[0]);
  if (!policy) throw notFound(`environment "${rest[0]}" does not exist`);
  print(policy, () => describe(policy));
  return 0;
};

/** planfence env freeze ENV --reason TEXT (ADMIN) */
export const freezeEnvironment: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'env freeze ENV --reason TEXT');
  if (!values.reason) throw new UsageError('env freeze needs --reason TEXT');
  const policy = await client.freezeEnvironment(rest[0], values.reason);
  print(policy, () => describe(policy));
  return 0;
};

/** planfence env unfreeze ENV (ADMIN) */
export const unfreezeEnvironment: Command = async ({ client, rest, print, need }) => {
  need(1, 'env unfreeze ENV');
  const policy = await client.unfreezeEnvironment(rest[0]);
  print(policy, () => describe(policy));
  return 0;
};

/** planfence plan queue [--first N]: what the caller may approve now, oldest first. */
export const reviewQueue: Command = async ({ client, values, print }) => {
  const plans = await client.reviewQueue(values.first ? integer(values.first, '--first') : 50);
  print(plans, () =>
    table(
      plans.map((plan) => ({
        ...planRow(plan),
        environment: plan.environment,
        needs: pending(plan.pendingApprovalRules),
        expiresAt: plan.expiresAt,
      })),
    ),
  );
  return 0;
};

/**
 * planfence policy test ENV --file PATH [--policy-file PATH] [--content-type TYPE]: what the
 * environment's policies (or the file's) decide for the plan in PATH; nothing is stored.
 * A .json file is a Terraform plan (terraform show -json) unless --content-type says TEXT.
 * Exit code 9 when a policy would refuse it.
 */
export const testPolicies: Command = async ({ client, rest, values, print, need }) => {
  need(
    1,
    'policy test ENV --file PATH [--policy-file PATH] [--content-type TEXT|TERRAFORM_PLAN_JSON]',
  );
  if (!values.file) throw new UsageError('policy test needs --file PATH');
  const type =
    values['content-type'] ?? (values.file.endsWith('.json') ? 'TERRAFORM_PLAN_JSON' : 'TEXT');
  if (type !== 'TEXT' && type !== 'TERRAFORM_PLAN_JSON') {
    throw new UsageError('--content-type must be TEXT or TERRAFORM_PLAN_JSON');
  }
  const content = readInput(values.file, 'plan file');
  const results = await client.dryRunPlanPolicies({
    environment: rest[0],
    content,
    contentType: type,
    planPolicies: values['policy-file'] ? readPolicyFile(values['policy-file']) : undefined,
  });
  print(results, () =>
    table(
      results.map((r) => ({
        policy: r.policy,
        effect: r.effect,
        matched: r.matched,
        message: r.message,
        error: r.error,
      })),
    ),
  );
  const denied = results.some((r) => r.error !== null || (r.effect === 'DENY' && r.matched));
  return denied ? DENIED_EXIT : 0;
};
