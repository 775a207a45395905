import type { EntityManager } from 'typeorm';
import type { AuditEntry } from '../audit/audit.service.js';
import type { Deployment, DeploymentOutcome } from '../model/deployment.entity.js';
import type { Environment } from '../model/environment.entity.js';
import type { LeaseTicket } from '../model/lease-ticket.entity.js';
import type { EventType, OutboxEvent } from '../outbox/outbox-event.js';
import type { Plan } from '../model/plan.entity.js';

/** An audit event the guard decided to record (besides the decision's own). */
export interface AuditEffect {
  kind: 'audit';
  at: number;
  entry: AuditEntry;
}

/** An outbox event (R22), by the object it concerns. */
export type OutboxEffect = {
  kind: 'outbox';
  type: EventType;
  actor: string;
  at: number;
} & (
  | { subject: 'plan'; plan: Plan }
  | { subject: 'deployment'; deployment: Deployment }
  | { subject: 'environment'; environment: Environment }
  | { subject: 'leaseTicket'; ticket: LeaseTicket }
  /** An event the guard wrote out itself (its data is not one object's, e.g. check.reported). */
  | { subject: 'event'; event: OutboxEvent }
);

/** A subscription announcement, heard only if the transaction commits. */
export type Announcement =
  | { kind: 'planPublished'; plan: Plan }
  | { kind: 'deploymentChanged'; deployment: Deployment }
  | { kind: 'leaseTicketChanged'; id: number };

/** A metric counted once the transaction commits. */
export interface MetricEffect {
  kind: 'deploymentEnded';
  outcome: DeploymentOutcome;
}

export type Effect = AuditEffect | OutboxEffect | Announcement | MetricEffect;

/**
 * What the guard decided besides its own writes, in the order it decided it. The guard only
 * adds to the list of the transaction (`m`) it runs in; the decision runner (src/decisions/)
 * opens the list, writes the audit and outbox rows in the same transaction, hands the
 * announcements over and counts the metrics after the commit.
 */
const lists = new WeakMap<EntityManager, Effect[]>();

/** Starts the effects list of a transaction; a list already open there is discarded. */
export function openEffects(m: EntityManager): void {
  lists.set(m, []);
}

/** Ends the effects list of a transaction and returns what was added to it, in order. */
export function takeEffects(m: EntityManager): Effect[] {
  const effects = lists.get(m) ?? [];
  lists.delete(m);
  return effects;
}

/** Adds to the effects list of the transaction `m`. */
export function addEffect(m: EntityManager, effect: Effect): void {
  const effects = lists.get(m);
  if (!effects) throw new Error('the guard decides only inside a decision (DecisionRunner)');
  effects.push(effect);
}
