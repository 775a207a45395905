import { Injectable } from '@nestjs/common';
import { MoreThan } from 'typeorm';
import { Clock } from '../common/clock.js';
import { InputError } from '../common/errors.js';
import { Database, select } from '../database/database.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { EnvironmentWrites } from '../fencing/environment-writes.js';
import { liveLease } from '../fencing/reads.js';
import type { Lease } from '../leases/lease.model.js';
import { Plan } from '../model/plan.entity.js';
import type { CreateEnvironmentInput } from './dto/create-environment.input.js';
import type { ApprovalRuleInput, UpdateEnvironmentPolicyInput } from './dto/policy.inputs.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { findOne } from '../database/rows.js';
import {
  type ApprovalRule,
  DEFAULT_APPROVAL_RULES,
  type Freeze,
  type Promotion,
} from './policy.model.js';
import type { PlanPolicy } from '../policies/plan-policy.model.js';
import { PoliciesService } from '../policies/policies.service.js';

/** The rules as stored; two rules for one group would be one rule with the larger count: refused. */
function approvalRules(input: ApprovalRuleInput[]): ApprovalRule[] {
  const rules = input.map((rule) => ({ group: rule.group ?? null, count: rule.count }));
  const groups = rules.map((rule) => rule.group ?? '(any)');
  const twice = groups.find((group, i) => groups.indexOf(group) !== i);
  if (twice !== undefined) {
    throw new InputError('BAD_USER_INPUT', `approvalRules name the group ${twice} twice`);
  }
  return rules;
}

function describePlanPolicies(policies: readonly PlanPolicy[], version: number): string {
  const text = policies.map((policy) => `${policy.name} (${policy.effect})`).join(', ');
  return `plan policies ${text || 'none'}; policy version ${version}`;
}

function describePolicy(rules: readonly ApprovalRule[], ttl: number | null | undefined): string {
  const text = rules.map((rule) => `${rule.group ?? '(any)'}:${rule.count}`).join(', ');
  return `rules ${text}; proposalTtlSeconds ${ttl ?? 'none'}`;
}

@Injectable()
export class EnvironmentsService {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly decisions: DecisionRunner,
    private readonly writes: EnvironmentWrites,
    private readonly policies: PoliciesService,
  ) {}

  create(actor: string, input: CreateEnvironmentInput): Promise<Environment> {
    const rules = input.approvalRules ? approvalRules(input.approvalRules) : DEFAULT_APPROVAL_RULES;
    return this.decisions.decide(
      { action: 'CREATE_ENVIRONMENT', environment: input.name, actor },
      (tx) =>
        this.writes.createEnvironment(tx, {
          name: input.name,
          mode: input.mode,
          requireApproval: input.requireApproval,
          approvalRules: rules,
          proposalTtlSeconds: input.proposalTtlSeconds ?? null,
          now: tx.now,
        }),
      (env) => ({
        detail: `mode ${env.mode}, requireApproval ${env.requireApproval}, ${describePolicy(rules, env.proposalTtlSeconds)}`,
      }),
    );
  }

  /**
   * R15, R16: audited as UPDATE_POLICY. R34: new plan policies are checked (parsed and
   * type-checked) before the decision; BAD_USER_INPUT {policy, error} is audited like any
   * rejection.
   */
  async updatePolicy(actor: string, input: UpdateEnvironmentPolicyInput): Promise<Environment> {
    const rules = input.approvalRules ? approvalRules(input.approvalRules) : undefined;
    // R51: set, removed (clearPromotion) or left (undefined).
    if (input.promotion && input.clearPromotion) {
      throw new InputError('BAD_USER_INPUT', 'give promotion or clearPromotion, not both');
    }
    if (input.promotion?.from === input.environment) {
      throw new InputError('BAD_USER_INPUT', 'an environment cannot be promoted from itself');
    }
    const promotion = input.promotion
      ? { from: input.promotion.from, soakMinutes: input.promotion.soakMinutes }
      : input.clearPromotion
        ? null
        : undefined;
    let planPolicies: PlanPolicy[] | undefined;
    let invalid: Error | null = null;
    if (input.planPolicies) {
      try {
        planPolicies = await this.policies.validate(input.planPolicies);
      } catch (error) {
        if (!(error instanceof Error)) throw error;
        invalid = error;
      }
    }
    return this.decisions.decide(
      { action: 'UPDATE_POLICY', environment: input.environment, actor },
      async (tx) => {
        if (invalid) throw invalid;
        return this.writes.updatePolicy(tx, {
          environment: input.environment,
          approvalRules: rules,
          proposalTtlSeconds: input.proposalTtlSeconds,
          planPolicies,
          queueMode: input.queueMode,
          maxQueueLength: input.maxQueueLength,
          requiredChecks: input.requiredChecks,
          promotion,
          deployWithinMinutes:
            input.deployWithinMinutes == null
              ? undefined
              : input.deployWithinMinutes === 0
                ? null
                : input.deployWithinMinutes,
          now: tx.now,
        });
      },
      (env) => ({
        detail: [
          rules
            ? describePolicy(rules, env.proposalTtlSeconds)
            : `proposalTtlSeconds ${env.proposalTtlSeconds ?? 'none'}`,
          ...(planPolicies ? [describePlanPolicies(planPolicies, env.policyVersion)] : []),
          `queue ${env.queueMode} of at most ${env.maxQueueLength}`,
          ...(input.requiredChecks
            ? [`required checks ${input.requiredChecks.join(', ') || 'none'}`]
            : []),
          ...(promotion !== undefined
            ? [
                promotion
                  ? `promotion from ${promotion.from} after ${promotion.soakMinutes} minutes`
                  : 'no promotion',
              ]
            : []),
          ...(input.deployWithinMinutes != null
            ? [`deploy within ${env.deployWithinMinutes ?? 'any time'} minutes`]
            : []),
        ].join('; '),
      }),
    );
  }

  /** R17: audited as FREEZE with the reason. */
  freeze(actor: string, environment: string, reason: string): Promise<Environment> {
    return this.decisions.decide(
      { action: 'FREEZE', environment, actor },
      (tx) => this.writes.freeze(tx, { environment, reason, actor, now: tx.now }),
      () => ({ detail: reason }),
    );
  }

  unfreeze(actor: string, environment: string): Promise<Environment> {
    return this.decisions.decide({ action: 'UNFREEZE', environment, actor }, (tx) =>
      this.writes.unfreeze(tx, { environment, actor, now: tx.now }),
    );
  }

  list(): Promise<Environment[]> {
    return this.db.read((m) => m.find(Environment, { order: { name: 'ASC' } }));
  }

  /** One page in name order: the environments named after `after`, at most `first` (null: all). */
  listPage(first: number | null, after: string | null): Promise<Environment[]> {
    return this.db.read((m) =>
      m.find(Environment, {
        where: after === null ? {} : { name: MoreThan(after) },
        order: { name: 'ASC' },
        ...(first === null ? {} : { take: first }),
      }),
    );
  }

  find(name: string): Promise<Environment | null> {
    return this.db.read((m) => findOne(m, Environment, { name }));
  }

  /** NOT_FOUND when the environment does not exist. */
  async get(name: string): Promise<Environment> {
    const env = await this.find(name);
    if (!env) throw EnvironmentError.notFound(name);
    return env;
  }

  async lease(env: Environment): Promise<Lease | null> {
    return liveLease(env, await this.clock.now());
  }

  async currentPlan(name: string): Promise<Plan | null> {
    return this.plan((await this.get(name)).currentPlanId);
  }

  plan(id: string | null): Promise<Plan | null> {
    return id ? this.db.read((m) => findOne(m, Plan, { id })) : Promise.resolve(null);
  }

  /** R50: the environment's required checks, in the order they were given. */
  requiredChecks(environment: string): Promise<string[]> {
    return this.db.read(async (m) => {
      const rows = await select<{ name: string }>(
        m,
        'SELECT name FROM required_checks WHERE environment = :environment ORDER BY position',
        { environment },
      );
      return rows.map((row) => row.name);
    });
  }

  /** The environment's rules, in the order they were given. */
  approvalRules(environment: string): Promise<ApprovalRule[]> {
    return this.db.read(async (m) => {
      const rows = await select<{ group_name: string | null; required_count: number | string }>(
        m,
        `SELECT group_name, required_count FROM approval_rules
         WHERE environment = :environment ORDER BY position`,
        { environment },
      );
      return rows.map((row) => ({ group: row.group_name, count: Number(row.required_count) }));
    });
  }
}

export function freezeOf(env: Environment): Freeze | null {
  if (!env.frozenAt) return null;
  return { reason: env.frozenReason ?? '', frozenBy: env.frozenBy ?? '', frozenAt: env.frozenAt };
}

/** R51: the environment's promotion, or null. */
export function promotionOf(env: Environment): Promotion | null {
  return env.promotionFrom != null
    ? { from: env.promotionFrom, soakMinutes: env.promotionSoakMinutes ?? 0 }
    : null;
}
