import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { execute } from '../database/database.js';
import { exists, findOneOrFail } from '../database/rows.js';
import { Environment, FencingMode, QueueMode } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import type { ApprovalRule } from '../environments/policy.model.js';
import type { PlanPolicy } from '../policies/plan-policy.model.js';
import type { DecisionTx } from './effects.js';
import { expireProposals } from './plan-status.js';
import { readEnvironment } from './reads.js';

/**
 * The guard's writes of an environment's settings: the environment itself, its approval
 * rules, plan policies (R15, R34) and queue settings, and its freeze (R17). Each runs
 * inside the caller's write transaction (`m`); a rejection is thrown before anything but
 * EXPIRED for proposals whose time has come (R16) was written.
 */
@Injectable()
export class EnvironmentWrites {
  async createEnvironment(
    tx: DecisionTx,
    p: {
      name: string;
      mode: FencingMode;
      requireApproval: boolean;
      approvalRules: readonly ApprovalRule[];
      proposalTtlSeconds: number | null;
      now: number;
    },
  ): Promise<Environment> {
    const m = tx.manager;
    if (await exists(m, Environment, { name: p.name })) {
      throw new EnvironmentError('ALREADY_EXISTS', `environment "${p.name}" already exists`);
    }
    await execute(
      m,
      `INSERT INTO environments (name, mode, require_approval, fence, last_issued_generation,
         current_generation, current_sequence, created_at, proposal_ttl_seconds)
       VALUES (:name, :mode, :requireApproval, 0, 0, 0, 0, :now, :proposalTtlSeconds)`,
      p,
    );
    await this.replaceRules(m, p.name, p.approvalRules);
    return findOneOrFail(m, Environment, { name: p.name });
  }

  /**
   * R15, R16: new rules apply to every later decision; a new TTL to plans submitted from
   * now on (a plan's expiresAt is fixed when it is submitted). `undefined` leaves a part as
   * it is; a null TTL means proposals no longer expire. New plan policies (R34) replace the
   * old ones and bump the policy version in the same statement. The queue settings
   * (queue mode, max queue length) are set by the same statement; null or `undefined`
   * leaves one as it is.
   */
  async updatePolicy(
    tx: DecisionTx,
    p: {
      environment: string;
      approvalRules?: readonly ApprovalRule[] | null;
      proposalTtlSeconds?: number | null;
      planPolicies?: readonly PlanPolicy[] | null;
      queueMode?: QueueMode | null;
      maxQueueLength?: number | null;
      /** R50: replaces the required checks. */
      requiredChecks?: readonly string[] | null;
      /** R51: sets the promotion; null removes it. */
      promotion?: { from: string; soakMinutes: number } | null;
      /** R52: sets the window; null removes it. */
      deployWithinMinutes?: number | null;
      now: number;
    },
  ): Promise<Environment> {
    const m = tx.manager;
    // R34, R50, R51: a submit is decided under the version of the policies and preconditions
    // it read; a change of either bumps it.
    const bump =
      p.planPolicies || p.requiredChecks || p.promotion !== undefined
        ? ', policy_version = policy_version + 1'
        : '';
    if (p.promotion && !(await exists(m, Environment, { name: p.promotion.from }))) {
      throw EnvironmentError.notFound(p.promotion.from);
    }
    // The first statement takes the environment's row (PostgreSQL): decisions in flight finish first.
    const found = await execute(
      m,
      `UPDATE environments SET proposal_ttl_seconds = ${
        p.proposalTtlSeconds !== undefined ? ':ttl' : 'proposal_ttl_seconds'
      }${bump},
         queue_mode = ${p.queueMode != null ? ':queueMode' : 'queue_mode'},
         max_queue_length = ${p.maxQueueLength != null ? ':maxQueueLength' : 'max_queue_length'},
         promotion_from = ${p.promotion !== undefined ? ':promotionFrom' : 'promotion_from'},
         promotion_soak_minutes = ${p.promotion !== undefined ? ':soak' : 'promotion_soak_minutes'},
         deploy_within_minutes = ${
           p.deployWithinMinutes !== undefined ? ':within' : 'deploy_within_minutes'
         }
       WHERE name = :environment`,
      {
        environment: p.environment,
        ttl: p.proposalTtlSeconds ?? null,
        queueMode: p.queueMode ?? null,
        maxQueueLength: p.maxQueueLength ?? null,
        promotionFrom: p.promotion?.from ?? null,
        soak: p.promotion?.soakMinutes ?? null,
        within: p.deployWithinMinutes ?? null,
      },
    );
    if (!found) throw EnvironmentError.notFound(p.environment);
    if (p.approvalRules) await this.replaceRules(m, p.environment, p.approvalRules);
    if (p.planPolicies) await this.replacePlanPolicies(m, p.environment, p.planPolicies);
    if (p.requiredChecks) await this.replaceRequiredChecks(m, p.environment, p.requiredChecks);
    await expireProposals(tx, p.now, p.environment);
    return readEnvironment(m, p.environment);
  }

  /** R17: while frozen, nothing is published but by an ADMIN's break-glass approval. Freezing again replaces the reason. */
  async freeze(
    tx: DecisionTx,
    p: { environment: string; reason: string; actor: string; now: number },
  ): Promise<Environment> {
    const m = tx.manager;
    const frozen = await execute(
      m,
      `UPDATE environments SET frozen_reason = :reason, frozen_by = :actor, frozen_at = :now
       WHERE name = :environment`,
      p,
    );
    if (!frozen) throw EnvironmentError.notFound(p.environment);
    await expireProposals(tx, p.now, p.environment);
    const env = await readEnvironment(m, p.environment);
    tx.decided({
      kind: 'outbox',
      subject: 'environment',
      type: 'environment.frozen',
      environment: env,
      actor: p.actor,
      at: p.now,
    });
    return env;
  }

  async unfreeze(
    tx: DecisionTx,
    p: { environment: string; actor: string; now: number },
  ): Promise<Environment> {
    const m = tx.manager;
    await execute(
      m,
      `UPDATE environments SET frozen_reason = NULL, frozen_by = NULL, frozen_at = NULL
       WHERE name = :environment`,
      p,
    );
    // An unknown environment: nothing changed or expired, and reading it back is NOT_FOUND.
    await expireProposals(tx, p.now, p.environment);
    const env = await readEnvironment(m, p.environment);
    tx.decided({
      kind: 'outbox',
      subject: 'environment',
      type: 'environment.unfrozen',
      environment: env,
      actor: p.actor,
      at: p.now,
    });
    return env;
  }

  private async replaceRules(
    m: EntityManager,
    environment: string,
    rules: readonly ApprovalRule[],
  ): Promise<void> {
    await execute(m, 'DELETE FROM approval_rules WHERE environment = :environment', {
      environment,
    });
    for (const [position, rule] of rules.entries()) {
      await execute(
        m,
        `INSERT INTO approval_rules (environment, position, group_name, required_count)
         VALUES (:environment, :position, :group, :count)`,
        { environment, position, group: rule.group, count: rule.count },
      );
    }
  }

  private async replaceRequiredChecks(
    m: EntityManager,
    environment: string,
    names: readonly string[],
  ): Promise<void> {
    await execute(m, 'DELETE FROM required_checks WHERE environment = :environment', {
      environment,
    });
    for (const [position, name] of names.entries()) {
      await execute(
        m,
        `INSERT INTO required_checks (environment, name, position)
         VALUES (:environment, :name, :position)`,
        { environment, name, position },
      );
    }
  }

  private async replacePlanPolicies(
    m: EntityManager,
    environment: string,
    policies: readonly PlanPolicy[],
  ): Promise<void> {
    await execute(m, 'DELETE FROM plan_policies WHERE environment = :environment', {
      environment,
    });
    for (const [position, policy] of policies.entries()) {
      await execute(
        m,
        `INSERT INTO plan_policies (environment, position, name, expression, effect, message,
           group_name, required_count)
         VALUES (:environment, :position, :name, :expression, :effect, :message, :group, :count)`,
        { environment, position, ...policy },
      );
    }
  }
}
