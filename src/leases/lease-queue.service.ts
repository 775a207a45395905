import { Injectable, type OnModuleInit } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { Clock } from '../common/clock.js';
import { Database, select } from '../database/database.js';
import { findOne } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { leaseTicketTopic } from '../events/events.service.js';
import type { SubscriptionPubSub } from '../events/feeds.js';
import { PgListener } from '../database/pg-listener.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { LeaseWrites } from '../fencing/lease-writes.js';
import { liveLease } from '../fencing/reads.js';
import { MetricsService } from '../metrics/metrics.service.js';
import type { EnqueueLeaseInput } from './dto/lease-queue.inputs.js';
import { QueueError } from '../model/lease-queue.errors.js';
import { LeaseTicket, LeaseTicketStatus } from '../model/lease-ticket.entity.js';
import type { Lease } from './lease.model.js';

/** The lease queue (DESIGN §17): decisions through the guard, and tickets as they read at the service clock's now. */
@Injectable()
export class LeaseQueueService implements OnModuleInit {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly decisions: DecisionRunner,
    private readonly writes: LeaseWrites,
    private readonly metrics: MetricsService,
    private readonly listener: PgListener,
  ) {}

  onModuleInit(): void {
    const stats = () => this.stats();
    new Gauge({
      name: 'planfence_lease_queue_length',
      help: 'Lease tickets WAITING, by environment',
      labelNames: ['environment'] as const,
      registers: [this.metrics.registry],
      async collect() {
        this.reset();
        for (const row of await stats()) this.set({ environment: row.environment }, row.waiting);
      },
    });
    new Gauge({
      name: 'planfence_lease_queue_wait_seconds',
      help: 'How long the head of the lease queue has waited, by environment',
      labelNames: ['environment'] as const,
      registers: [this.metrics.registry],
      async collect() {
        this.reset();
        for (const row of await stats())
          this.set({ environment: row.environment }, row.waitSeconds);
      },
    });
  }

  enqueue(principal: Principal, input: EnqueueLeaseInput): Promise<LeaseTicket> {
    const holder = input.instance ? `${principal.name}/${input.instance}` : principal.name;
    return this.decisions
      .decide(
        { action: 'ENQUEUE_LEASE', environment: input.environment, actor: holder },
        (tx) =>
          this.writes.enqueueLease(tx, {
            environment: input.environment,
            principal: principal.name,
            holder,
            ttlSeconds: input.ttlSeconds,
            maxWaitSeconds: input.maxWaitSeconds,
            now: tx.now,
          }),
        (ticket) => ({
          generation: ticket.generation,
          detail: `ticket ${ticket.id} ${ticket.status}`,
        }),
      )
      .then((ticket) => this.asRead(ticket));
  }

  /** R39: by its owner (the principal that enqueued it) or an ADMIN; `ticket` as `find` read it. */
  async cancel(principal: Principal, ticket: LeaseTicket): Promise<LeaseTicket> {
    const cancelled = await this.decisions.decide(
      { action: 'CANCEL_LEASE_TICKET', environment: ticket.environment, actor: principal.name },
      (tx) => {
        // Refused inside the decision, so that the refusal is audited as any other (R12).
        if (principal.role !== Role.ADMIN && ticket.principal !== principal.name) {
          throw new QueueError('FORBIDDEN', `lease ticket ${ticket.id} is not ${principal.name}'s`);
        }
        return this.writes.cancelLeaseTicket(tx, { id: ticket.id, now: tx.now });
      },
      (t) => ({ detail: `ticket ${t.id} ${t.status}` }),
    );
    return this.asRead(cancelled);
  }

  async find(id: string | number): Promise<LeaseTicket | null> {
    const ticket = await this.db.read((m) => findOne(m, LeaseTicket, { id: Number(id) }));
    return ticket && this.asRead(ticket);
  }

  /** WAITING tickets in grant order. NOT_FOUND for an unknown environment. */
  async queue(environment: string): Promise<LeaseTicket[]> {
    const now = await this.clock.now();
    const { env, tickets } = await this.db.read(async (m) => ({
      env: await findOne(m, Environment, { name: environment }),
      tickets: await m
        .createQueryBuilder(LeaseTicket, 't')
        .where('t.environment = :environment', { environment })
        .andWhere(`t.status = 'WAITING'`)
        .andWhere('t.expiresAt > :now', { now })
        .orderBy('t.id', 'ASC')
        .getMany(),
    }));
    if (!env) throw EnvironmentError.notFound(environment);
    return tickets.map((ticket, i) => Object.assign(ticket, { position: i + 1 }));
  }

  /** The lease granted to the ticket: the environment's live lease while it is that grant's, else the grant as made. */
  async lease(ticket: LeaseTicket): Promise<Lease | null> {
    if (ticket.status !== LeaseTicketStatus.GRANTED || ticket.generation == null) return null;
    const now = await this.clock.now();
    const env = await this.db.read((m) => findOne(m, Environment, { name: ticket.environment }));
    const live = env && liveLease(env, now);
    if (live?.generation === ticket.generation) return live;
    const acquiredAt = ticket.grantedAt ?? ticket.enqueuedAt;
    return {
      environment: ticket.environment,
      holder: ticket.holder,
      generation: ticket.generation,
      acquiredAt,
      expiresAt: new Date(acquiredAt.getTime() + ticket.ttlSeconds * 1000),
    };
  }

  /**
   * leaseTicketChanged: the ticket as it reads now, then each status change, heard from
   * every instance. The topic is subscribed before the first read, so no change is missed.
   * On PostgreSQL, a subscription open while this instance's LISTEN connection was lost is
   * completed when it is back (as the other feeds are): its client subscribes again and
   * starts from the ticket as it reads then.
   */
  async changes(pubsub: SubscriptionPubSub, id: string): Promise<AsyncIterable<unknown>> {
    const live = await pubsub.subscribe(leaseTicketTopic(id));
    this.metrics.subscriptions.inc({ field: 'leaseTicketChanged' });
    const stop = this.listener.onRecovery(() => pubsub.close?.());
    let first: LeaseTicket | null;
    try {
      first = await this.find(id);
      if (!first) throw QueueError.ticketNotFound(id);
    } catch (error) {
      stop();
      pubsub.close?.();
      throw error;
    }
    return statusChanges(first, live, () => this.find(id), stop);
  }

  /** The ticket as it reads at the service clock's now. */
  private async asRead(ticket: LeaseTicket): Promise<LeaseTicket> {
    const now = await this.clock.now();
    if (ticket.status !== LeaseTicketStatus.WAITING)
      return Object.assign(ticket, { position: null });
    if (ticket.expiresAt.getTime() <= now) {
      return Object.assign(ticket, { status: LeaseTicketStatus.EXPIRED, position: null });
    }
    const [row] = await this.db.read((m) =>
      select<{ n: number | string }>(
        m,
        `SELECT COUNT(*) AS n FROM lease_tickets WHERE environment = :environment
           AND status = 'WAITING' AND expires_at > :now AND id <= :id`,
        { environment: ticket.environment, now, id: ticket.id },
      ),
    );
    return Object.assign(ticket, { position: Number(row.n) });
  }

  private async stats(): Promise<{ environment: string; waiting: number; waitSeconds: number }[]> {
    const now = await this.clock.now();
    const rows = await this.db.read((m) =>
      select<{ environment: string; waiting: number | string; oldest: number | string }>(
        m,
        `SELECT environment, COUNT(*) AS waiting, MIN(enqueued_at) AS oldest FROM lease_tickets
         WHERE status = 'WAITING' AND expires_at > :now GROUP BY environment`,
        { now },
      ),
    );
    return rows.map((row) => ({
      environment: row.environment,
      waiting: Number(row.waiting),
      waitSeconds: Math.max(0, (now - Number(row.oldest)) / 1000),
    }));
  }
}

/** The first state, then the ticket each time its status is heard to have changed. */
async function* statusChanges(
  first: LeaseTicket,
  live: AsyncIterable<unknown>,
  read: () => Promise<LeaseTicket | null>,
  ended: () => void,
): AsyncGenerator<unknown> {
  try {
    let last = first.status;
    yield { leaseTicketChanged: first };
    for await (const event of live) {
      void event;
      const ticket = await read();
      if (!ticket || ticket.status === last) continue;
      last = ticket.status;
      yield { leaseTicketChanged: ticket };
    }
  } finally {
    ended();
  }
}
