import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database, execute, executeLater, jsonList, select } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { ensureEnvironmentRowHeld } from '../fencing/row-locks.js';
import type { Deployment } from '../model/deployment.entity.js';
import type { Environment } from '../model/environment.entity.js';
import type { LeaseTicket } from '../model/lease-ticket.entity.js';
import { type Plan, PLAN_FIELDS_BUT_CONTENT } from '../model/plan.entity.js';
import type { EventType, OutboxEvent } from './outbox-event.js';
import { PlanId } from '../common/ids.js';

/** An environment pattern (`*` any run of characters) as the LIKE pattern the fan-out matches with. */
export function likePattern(pattern: string): string {
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replace(/\*/g, '%');
}

/** The parts of a plan an event carries: everything but its content, which a receiver reads by id. */
export function planData(plan: Plan): Record<string, unknown> {
  return Object.fromEntries(PLAN_FIELDS_BUT_CONTENT.map((field) => [field, plan[field]]));
}

/** The columns of an outbox row besides its data, by OutboxEvent field. */
const COLUMNS = [
  'environment',
  'type',
  'at',
  'generation',
  'sequence',
  'planId',
  'deploymentSequence',
  'actor',
] as const satisfies readonly (keyof OutboxEvent)[];

/** At most this many events share one INSERT: one statement text per row count, prepared once each. */
const ROWS_PER_INSERT = 8;

const insertStatements: string[] = [];

/** The INSERT of `rows` events, their parameters numbered from 0 (`:environment0`, …, `:data0`). */
function insertEvents(rows: number): string {
  return (insertStatements[rows] ??= `INSERT INTO outbox_events (environment, type, at, generation,
     sequence, plan_id, deployment_sequence, actor, data)
   VALUES ${Array.from(
     { length: rows },
     (_, i) => `(${[...COLUMNS, 'data'].map((column) => `:${column}${i}`).join(', ')})`,
   ).join(', ')}`);
}

/** A plan's event: its fencing token and everything of it but its content. */
export function planEvent(type: EventType, plan: Plan, actor: string, at: number): OutboxEvent {
  return {
    environment: plan.environment,
    type,
    at,
    generation: plan.generation,
    sequence: plan.sequence,
    planId: plan.id,
    deploymentSequence: null,
    actor,
    data: planData(plan),
  };
}

/** A deployment's event: the token of the plan it deploys, and its own sequence. */
export function deploymentEvent(
  type: EventType,
  deployment: Deployment,
  actor: string,
  at: number,
): OutboxEvent {
  const token = PlanId.parse(deployment.planId);
  return {
    environment: deployment.environment,
    type,
    at,
    generation: token?.generation ?? null,
    sequence: token?.sequence ?? null,
    planId: deployment.planId,
    deploymentSequence: deployment.sequence,
    actor,
    data: { ...deployment },
  };
}

/** An environment's event (a freeze or thaw): its state as the event left it. */
export function environmentEvent(
  type: EventType,
  env: Environment,
  actor: string,
  at: number,
): OutboxEvent {
  return {
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
  };
}

/** A lease ticket's event (R39): its generation once granted. */
export function leaseTicketEvent(
  type: EventType,
  ticket: LeaseTicket,
  actor: string,
  at: number,
): OutboxEvent {
  return {
    environment: ticket.environment,
    type,
    at,
    generation: ticket.generation,
    sequence: null,
    planId: null,
    deploymentSequence: null,
    actor,
    data: {
      id: String(ticket.id),
      environment: ticket.environment,
      holder: ticket.holder,
      status: ticket.status,
      generation: ticket.generation,
      ttlSeconds: ticket.ttlSeconds,
      enqueuedAt: ticket.enqueuedAt,
      grantedAt: ticket.grantedAt,
      expiresAt: ticket.expiresAt,
    },
  };
}

/**
 * The transactional outbox (R22). Every event is written by the transaction of the decision
 * that causes it (the guard's, inside its savepoint when writes share a group commit), so an
 * event exists if and only if its decision committed. The dispatcher then queues one PENDING
 * delivery per webhook that wants it (fanOut), in batches, outside the decision.
 *
 * Order: an environment's events get increasing ids in commit order. On SQLite one
 * transaction writes at a time; on PostgreSQL every writer of an environment's events first
 * takes the environment's row lock and keeps it to its commit, so the ids it draws are above
 * those of every transaction of that environment that committed before it, and below those
 * of every one that commits after. fanOut takes events in id order, one batch at a time
 * (one instance at a time), so each (webhook, environment) line's deliveries get increasing
 * ids in commit order too.
 */
@Injectable()
export class Outbox {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly db: Database) {}

  /** `listener` runs after each commit that recorded events on this instance. */
  onRecorded(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Writes `events` in the transaction `m`, in the given order (their ids ascend in it):
   * up to ROWS_PER_INSERT of them in one statement.
   */
  async record(m: Transaction, events: readonly OutboxEvent[]): Promise<void> {
    if (!events.length) return;
    // PostgreSQL: each environment's row, unless the transaction holds it already (the
    // guard's decisions change it first), so that a decision that records several events
    // locks once.
    if (this.db.dialect === 'postgres')
      for (const environment of new Set(events.map((event) => event.environment)))
        await ensureEnvironmentRowHeld(m, environment);
    for (let from = 0; from < events.length; from += ROWS_PER_INSERT) {
      const rows = events.slice(from, from + ROWS_PER_INSERT);
      const parameters: Record<string, unknown> = {};
      rows.forEach((event, i) => {
        for (const column of COLUMNS) parameters[`${column}${i}`] = event[column];
        parameters[`data${i}`] = JSON.stringify(event.data);
      });
      await executeLater(m, insertEvents(rows.length), parameters);
    }
    this.recordedBy(m);
  }

  /**
   * The transaction `m` records events by a statement of its own (a submit at once, see
   * src/decisions/submit-at-once.ts): the listeners run after its commit, as after record's.
   */
  recordedBy(m: Transaction): void {
    this.db.afterCommit(m, () => this.committed());
  }

  /** Events were recorded by a write that committed (the SQLite writer thread's): the listeners run now. */
  committed(): void {
    for (const listener of this.listeners) listener();
  }

  /**
   * Queues the deliveries of the next `limit` events not yet fanned out, in one transaction
   * (`m`), and returns how many events it took. On PostgreSQL the caller holds LINES_LOCK.
   *
   * Only the head of a (webhook, environment) line is ever due: deliveries are queued with
   * no next attempt, and then each line this batch touched gets its first PENDING delivery
   * due now if it has none due yet; the dispatcher makes the next one due when it finishes
   * a head. So the dispatcher never scans a backlog.
   */
  async fanOut(m: EntityManager, now: number, limit: number): Promise<number> {
    const events = await select<{ id: number | string }>(
      m,
      'SELECT id FROM outbox_events WHERE fanned_out = 0 ORDER BY id LIMIT :limit',
      { limit },
    );
    if (!events.length) return 0;
    const ids = JSON.stringify(events.map((event) => Number(event.id)));
    const batch = jsonList(this.db.dialect, 'ids', 'integer');
    await execute(
      m,
      `INSERT INTO webhook_deliveries (webhook_id, event_id, environment, event_type,
         status, attempts, created_at, retry_from, next_attempt_at)
       SELECT w.id, e.id, e.environment, e.type, 'PENDING', 0, e.at, e.at, NULL
       FROM outbox_events e JOIN webhooks w ON w.created_at <= e.at
       WHERE e.id IN (${batch})
         AND EXISTS (SELECT 1 FROM webhook_event_types t
                     WHERE t.webhook_id = w.id AND t.event_type = e.type)
         AND (w.all_environments = 1 OR EXISTS (SELECT 1 FROM webhook_environments p
              WHERE p.webhook_id = w.id AND e.environment LIKE p.pattern ESCAPE '\\'))
       ORDER BY e.id, w.id`,
      { ids },
    );
    await execute(
      m,
      `UPDATE webhook_deliveries SET next_attempt_at = :now
       WHERE id IN (
         SELECT (SELECT MIN(x.id) FROM webhook_deliveries x
                 WHERE x.webhook_id = l.webhook_id AND x.environment = l.environment
                   AND x.status = 'PENDING')
         FROM (SELECT DISTINCT webhook_id, environment FROM webhook_deliveries
               WHERE event_id IN (${batch})) l)
         AND next_attempt_at IS NULL`,
      { now, ids },
    );
    await execute(m, `UPDATE outbox_events SET fanned_out = 1 WHERE id IN (${batch})`, { ids });
    return events.length;
  }
}
