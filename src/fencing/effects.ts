import type { AuditEntry } from '../audit/audit.service.js';
import type { Transaction } from '../database/transaction.js';
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
 * One decision's transaction as the guard is handed it: the transaction itself, the time the
 * decision is made at, and the list of what the decision decided besides its own writes, in
 * the order decided. The decision runner (src/decisions/) creates it for each attempt, passes
 * it to the guard's write, and alone records `effects` once the write has returned (or been
 * rejected): the audit and outbox rows in the same transaction, the announcements and the
 * metrics after the commit. The guard only adds to the list; it sends nothing itself.
 */
export class DecisionTx {
  readonly effects: Effect[] = [];

  constructor(
    readonly manager: Transaction,
    readonly now: number,
  ) {}

  /** Adds to what the decision decided, after what it decided before. */
  decided(effect: Effect): void {
    this.effects.push(effect);
  }
}
