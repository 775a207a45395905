import { Injectable, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { AuditEvent } from '../model/audit-event.entity.js';
import { Database, select } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { findOne } from '../database/rows.js';
import { Deployment } from '../model/deployment.entity.js';
import { Plan } from '../model/plan.entity.js';
import { COLUMNS, encode, type EventKind, fromRow, rebuild, type Wire } from './event-wire.js';
import { PgListener } from '../database/pg-listener.js';

interface PubSub {
  publish(event: { topic: string; payload: unknown }, callback?: () => void): void;
}

export const planPublishedTopic = (environment: string) => `planPublished:${environment}`;
export const auditRecordedTopic = (environment: string) => `auditEventRecorded:${environment}`;
/** Every environment's audit events on one topic (the dashboard's one subscription). */
export const activityTopic = () => 'activityRecorded';
export const deploymentChangedTopic = (environment: string) => `deploymentChanged:${environment}`;

/** One lease ticket's changes (leaseTicketChanged). */
export const leaseTicketTopic = (id: number | string) => `leaseTicketChanged:${id}`;

/** The PostgreSQL channel that carries the ids of changed lease tickets to every instance. */
export const TICKETS_CHANNEL = 'planfence_tickets';

/** The PostgreSQL channel that carries subscription events to every instance. */
export const EVENTS_CHANNEL = 'planfence_events';

/**
 * Subscription events (planPublished, auditEventRecorded and activityRecorded,
 * deploymentChanged), announced by the transaction that caused them and heard only if it
 * commits, in commit order.
 *
 * SQLite (one instance): published to this instance's subscribers after the commit.
 *
 * PostgreSQL (any number of instances): the deciding transaction makes one
 * `pg_notify('planfence_events', payload)` per event and nothing else (Database.notify
 * sends a transaction's notifications in one statement before its COMMIT). NOTIFY is
 * transactional: "if a NOTIFY is executed inside a transaction, the notify events are not
 * delivered until and unless the transaction is committed", and "if two notifications are
 * sent from different transactions, they will be delivered in the order the transactions
 * committed" (https://www.postgresql.org/docs/current/sql-notify.html). Every instance, the
 * one that made the decision included, hears it on its LISTEN connection (PgListener) and
 * publishes it to its own subscribers in that order; so the subscribers of every instance
 * hear every event once, in the same order. The payload rebuilds the announced object
 * (src/events/event-wire.ts).
 */
@Injectable()
export class EventsService {
  private readonly logger = new Logger(EventsService.name);
  private readonly distributed: boolean;
  /** Notifications whose object is being read (id-only payloads), in arrival order. */
  private delivering: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database,
    private readonly adapterHost: HttpAdapterHost,
    listener: PgListener,
  ) {
    this.distributed = listener.enabled;
    if (this.distributed) {
      listener.on(EVENTS_CHANNEL, (payload) => this.heard(payload));
      listener.on(TICKETS_CHANNEL, (id) => this.publish(leaseTicketTopic(id), { id }));
    }
  }

  /**
   * A lease ticket changed status. Only its id travels: a ticket changes status once
   * (WAITING to its final status), so its row, read when the event is heard, is that change.
   */
  leaseTicketChanged(m: Transaction, id: number): void {
    if (this.distributed) return this.db.notify(m, TICKETS_CHANNEL, String(id));
    this.db.afterCommit(m, () => this.publish(leaseTicketTopic(id), { id: String(id) }));
  }

  planPublished(m: Transaction, plan: Plan): void {
    if (this.distributed) return this.db.notify(m, EVENTS_CHANNEL, encode('plan', plan));
    this.db.afterCommit(m, () => this.deliver('plan', plan));
  }

  auditEventRecorded(m: Transaction, event: AuditEvent): void {
    if (this.distributed) return this.db.notify(m, EVENTS_CHANNEL, encode('audit', event));
    this.db.afterCommit(m, () => this.deliver('audit', event));
  }

  deploymentChanged(m: Transaction, deployment: Deployment): void {
    if (this.distributed)
      return this.db.notify(m, EVENTS_CHANNEL, encode('deployment', deployment));
    this.db.afterCommit(m, () => this.deliver('deployment', deployment));
  }

  /**
   * SQLite: an event of a write the writer thread committed (Database.writeOnThread),
   * announced now, from that write's after-commit callback (so in commit order).
   */
  committed(kind: 'plan' | 'audit', object: Plan | AuditEvent): void {
    if (this.distributed) throw new Error('committed() is for SQLite');
    this.deliver(kind, object);
  }

  /** A notification, in the order PostgreSQL delivered it. */
  private heard(payload: string): void {
    const wire = JSON.parse(payload) as Wire;
    const announced =
      'row' in wire
        ? Promise.resolve(rebuild(wire, (kind, id, field) => this.readField(kind, id, field)))
        : this.readRow(wire.k, wire.id).then((row) => row && fromRow(wire.k, row));
    // Behind any id-only payload still being read, so that the order stays.
    this.delivering = this.delivering.then(async () => {
      try {
        const object = await announced;
        if (object) this.deliver(wire.k, object);
        else this.logger.warn(`the ${wire.k} of a subscription event is gone`);
      } catch (error) {
        this.logger.error(`a subscription event was dropped: ${(error as Error).message}`);
      }
    });
  }

  private readRow(
    kind: EventKind,
    id: string | number,
  ): Promise<Plan | AuditEvent | Deployment | null> {
    return this.db.read<Plan | AuditEvent | Deployment | null>((m) => {
      switch (kind) {
        case 'plan':
          return findOne(m, Plan, { id: String(id) });
        case 'audit':
          return findOne(m, AuditEvent, { id: Number(id) });
        case 'deployment':
          return findOne(m, Deployment, { id: String(id) });
      }
    });
  }

  private async readField(kind: EventKind, id: string | number, field: string): Promise<unknown> {
    const { table, columns } = COLUMNS[kind];
    const column = columns[field];
    if (!column) throw new Error(`${kind}.${field} is not read by id`);
    const [row] = await this.db.read((m) =>
      select<Record<string, unknown>>(m, `SELECT ${column} AS value FROM ${table} WHERE id = :id`, {
        id,
      }),
    );
    return row?.value ?? null;
  }

  /**
   * Hears every event this instance delivers to its subscribers (every instance's, after
   * their commits), until the returned function is called. For waits inside the service
   * (an MCP tool waiting for a decision): a wake-up, never a decision.
   */
  onDelivered(
    listener: (kind: EventKind, object: Plan | AuditEvent | Deployment) => void,
  ): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private readonly listeners = new Set<
    (kind: EventKind, object: Plan | AuditEvent | Deployment) => void
  >();

  private deliver(kind: EventKind, object: Plan | AuditEvent | Deployment): void {
    for (const listener of this.listeners) listener(kind, object);
    switch (kind) {
      case 'plan':
        return this.publish(planPublishedTopic(object.environment), { planPublished: object });
      case 'audit':
        this.publish(auditRecordedTopic(object.environment), { auditEventRecorded: object });
        return this.publish(activityTopic(), { activityRecorded: object });
      case 'deployment':
        return this.publish(deploymentChangedTopic(object.environment), {
          deploymentChanged: object,
        });
    }
  }

  private publish(topic: string, payload: unknown): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance<{ graphql?: { pubsub?: PubSub } }>();
    const pubsub = fastify?.graphql?.pubsub;
    if (!pubsub) return void this.logger.warn(`no subscription transport; dropped ${topic}`);
    pubsub.publish({ topic, payload });
  }
}
