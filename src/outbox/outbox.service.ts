import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database, execute, select } from '../database/database.js';
import type { Deployment } from '../deployments/deployment.entity.js';
import type { Environment } from '../environments/environment.entity.js';
import type { Plan } from '../plans/plan.entity.js';
import type { EventType, OutboxEvent } from './outbox-event.js';

/** An environment pattern (`*` any run of characters) as the LIKE pattern the fan-out matches with. */
export function likePattern(pattern: string): string {
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replace(/\*/g, '%');
}

/** The parts of a plan an event carries: everything but its content, which a receiver reads by id. */
export function planData(plan: Plan): Record<string, unknown> {
  return {
    id: plan.id,
    environment: plan.environment,
    generation: plan.generation,
    sequence: plan.sequence,
    status: plan.status,
    title: plan.title,
    contentHash: plan.contentHash,
    submittedBy: plan.submittedBy,
    submittedAt: plan.submittedAt,
    basedOnPlanId: plan.basedOnPlanId,
    reviewedBy: plan.reviewedBy,
    reviewedAt: plan.reviewedAt,
    rejectionReason: plan.rejectionReason,
    publishedAt: plan.publishedAt,
    expiresAt: plan.expiresAt,
  };
}

/** `<environment>@<generation>.<sequence>` → its fencing token. */
function tokenOf(planId: string): { generation: number; sequence: number } | null {
  const match = /@(\d+)\.(\d+)$/.exec(planId);
  return match ? { generation: Number(match[1]), sequence: Number(match[2]) } : null;
}

/**
 * The transactional outbox (R22). Every event is written by the transaction of the decision
 * that causes it (the guard's, inside its savepoint when writes share a group commit), so an
 * event exists if and only if its decision committed. The same statement sequence creates one
 * PENDING delivery per webhook that wants the event; the dispatcher sends them later.
 *
 * Order: an environment's events (and so each webhook's deliveries for it) get increasing ids
 * in commit order. On SQLite one transaction writes at a time; on PostgreSQL every writer of
 * an environment's events first takes the environment's row lock and keeps it to its commit,
 * so the ids it draws are above those of every transaction of that environment that committed
 * before it, and below those of every one that commits after.
 */
@Injectable()
export class Outbox {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly db: Database) {}

  /** `listener` runs after each commit that created deliveries on this instance. */
  onDeliveriesCreated(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async record(m: EntityManager, event: OutboxEvent): Promise<void> {
    if (this.db.dialect === 'postgres') {
      await select(m, 'SELECT name FROM environments WHERE name = :environment FOR UPDATE', {
        environment: event.environment,
      });
    }
    const [row] = await select<{ id: number | string }>(
      m,
      `INSERT INTO outbox_events (environment, type, at, generation, sequence, plan_id,
         deployment_sequence, actor, data)
       VALUES (:environment, :type, :at, :generation, :sequence, :planId, :deploymentSequence,
         :actor, :data)
       RETURNING id`,
      { ...event, data: JSON.stringify(event.data) },
    );
    const created = await execute(m, FAN_OUT, {
      eventId: Number(row.id),
      environment: event.environment,
      type: event.type,
      at: event.at,
    });
    if (created) {
      this.db.afterCommit(m, () => {
        for (const listener of this.listeners) listener();
      });
    }
  }

  plan(m: EntityManager, type: EventType, plan: Plan, actor: string, at: number): Promise<void> {
    return this.record(m, {
      environment: plan.environment,
      type,
      at,
      generation: plan.generation,
      sequence: plan.sequence,
      planId: plan.id,
      deploymentSequence: null,
      actor,
      data: planData(plan),
    });
  }

  deployment(
    m: EntityManager,
    type: EventType,
    deployment: Deployment,
    actor: string,
    at: number,
  ): Promise<void> {
    const token = tokenOf(deployment.planId);
    return this.record(m, {
      environment: deployment.environment,
      type,
      at,
      generation: token?.generation ?? null,
      sequence: token?.sequence ?? null,
      planId: deployment.planId,
      deploymentSequence: deployment.sequence,
      actor,
      data: { ...deployment },
    });
  }

  environment(
    m: EntityManager,
    type: EventType,
    env: Environment,
    actor: string,
    at: number,
  ): Promise<void> {
    return this.record(m, {
      environment: env.name,
      type,
      at,
      generation: null,
      sequence: null,
      planId: null,
      deploymentSequence: null,
      actor,
      data: {
        name: env.name,
        frozen: env.frozenAt != null,
        frozenReason: env.frozenReason,
        frozenBy: env.frozenBy,
        frozenAt: env.frozenAt,
        currentPlanId: env.currentPlanId,
      },
    });
  }
}

/**
 * One PENDING delivery of event :eventId for every webhook that wants its type and
 * environment. Only the head of a (webhook, environment) line is ever due: a delivery queued
 * behind a PENDING one waits with no next attempt until the dispatcher finishes the one
 * before it (so the dispatcher never scans a backlog). The environment's row lock, held by
 * this transaction and taken by the dispatcher when it finishes a head, orders the two.
 */
const FAN_OUT = `INSERT INTO webhook_deliveries (webhook_id, event_id, environment, event_type,
    status, attempts, created_at, retry_from, next_attempt_at)
  SELECT w.id, CAST(:eventId AS INTEGER), CAST(:environment AS VARCHAR(63)),
    CAST(:type AS VARCHAR(32)), 'PENDING', 0, CAST(:at AS BIGINT), CAST(:at AS BIGINT),
    CASE WHEN EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.webhook_id = w.id
                      AND x.environment = :environment AND x.status = 'PENDING')
      THEN NULL ELSE CAST(:at AS BIGINT) END
  FROM webhooks w
  WHERE EXISTS (SELECT 1 FROM webhook_event_types t
                WHERE t.webhook_id = w.id AND t.event_type = :type)
    AND (w.all_environments = 1 OR EXISTS (SELECT 1 FROM webhook_environments p
         WHERE p.webhook_id = w.id AND :environment LIKE p.pattern ESCAPE '\\'))
  ORDER BY w.id`;
