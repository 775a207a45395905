import type { ApprovalRule, EnvironmentPolicy } from '../../client/client.js';
import { type Command, integer, pending, planRow, table, UsageError } from '../command.js';

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
  ].join('\n');

/** planfence env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none]: shows, or changes (ADMIN). */
export const environmentPolicy: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none]');
  const rules = values.rule?.map(rule);
  const ttl =
    values.ttl === undefined
      ? undefined
      : values.ttl === 'none'
        ? null
        : integer(values.ttl, '--ttl');
  const policy =
    rules || ttl !== undefined
      ? await client.updateEnvironmentPolicy({
          environment: rest[0],
          approvalRules: rules,
          proposalTtlSeconds: ttl,
        })
      : await client.policy(rest[0]);
  if (!policy) throw new UsageError(`environment "${rest[0]}" does not exist`);
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
