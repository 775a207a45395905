import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { execute, select, updateReturning } from '../database/database.js';
import { findOne, findOneOrFail, insertRow } from '../database/rows.js';
import { takeEnvironmentRow } from './row-locks.js';
import { type Environment, QueueMode } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { LeaseGrant } from '../model/lease-grant.entity.js';
import { LeaseTicket } from '../model/lease-ticket.entity.js';
import { QueueError } from '../model/lease-queue.errors.js';
import type { Lease } from '../leases/lease.model.js';
import type { DecisionTx } from './effects.js';
import {
  announceExpired,
  expireProposals,
  expiringProposals,
  markObsolete,
} from './plan-status.js';
import { liveLease, readEnvironment } from './reads.js';
import { generationsExhausted, leaseHeld, leaseNotHeld } from './rejections.js';
import {
  HEAD_TICKET,
  ISSUE_GENERATION,
  LAST_GENERATION,
  LIVE_LEASE_OF_CALLER,
  WAITING_TICKETS,
} from './sql.js';

/**
 * The guard's lease writes: every statement that issues a generation, grants, renews or
 * releases a lease, raises the fence with a grant (STRICT, R3) or changes a lease ticket.
 * Each decision is one conditional statement whose affected-row count decides (R2). Each
 * runs inside the caller's write transaction (`m`); a rejection is thrown before anything
 * but what holds whatever the decision (expired proposals and tickets, a hand-off to the
 * queue) was written.
 */
@Injectable()
export class LeaseWrites {
  /**
   * R1, R10: a new generation per grant; STRICT raises the fence to it in the same statement.
   * R38: refused while lease tickets wait, after the queue was handed the lease if it was free.
   */
  async grantLease(
    tx: DecisionTx,
    p: { environment: string; principal: string; holder: string; ttlMs: number; now: number },
  ): Promise<Lease> {
    const m = tx.manager;
    await this.handOffLease(tx, p.environment, p.now);
    // The read after the decision is sent with it (one round trip on PostgreSQL).
    const [granted, env] = await Promise.all([
      execute(
        m,
        `UPDATE environments SET
         ${ISSUE_GENERATION},
         lease_holder = :holder, lease_principal = :principal,
         lease_acquired_at = :now, lease_expires_at = :expiresAt
       WHERE name = :environment AND last_issued_generation < ${LAST_GENERATION}
         AND (lease_holder IS NULL OR lease_expires_at <= :now OR lease_holder = :holder)
         AND NOT EXISTS (${WAITING_TICKETS})`,
        { ...p, expiresAt: p.now + p.ttlMs },
      ),
      readEnvironment(m, p.environment),
    ]);
    if (!granted) throw await leaseHeld(m, env, p.now, p);
    await this.recordGrant(tx, env, p, p.now);
    return liveLease(env, p.now)!;
  }

  /** R10: keeps the generation; only the caller's own live lease can be renewed. */
  async renewLease(
    tx: DecisionTx,
    p: { environment: string; principal: string; generation: number; ttlMs: number; now: number },
  ): Promise<Lease> {
    const m = tx.manager;
    const renewed = await execute(
      m,
      `UPDATE environments SET lease_expires_at = :expiresAt
       WHERE name = :environment AND ${LIVE_LEASE_OF_CALLER}`,
      { ...p, expiresAt: p.now + p.ttlMs },
    );
    if (!renewed) {
      // Named as things stood when the renewal was refused; then the caller's lease being
      // over, the queue is handed the environment (R37).
      const refused = await leaseNotHeld(m, p);
      await this.handOffLease(tx, p.environment, p.now);
      throw refused;
    }
    // Sent together (one round trip on PostgreSQL): the read does not depend on the expiries.
    const [expired, environment] = await Promise.all([
      expiringProposals(m, p.now, p.environment),
      readEnvironment(m, p.environment),
    ]);
    await announceExpired(tx, expired, p.now);
    return liveLease(environment, p.now)!;
  }

  async releaseLease(
    tx: DecisionTx,
    p: { environment: string; principal: string; generation: number; now: number },
  ): Promise<void> {
    const m = tx.manager;
    const released = await execute(
      m,
      `UPDATE environments SET lease_holder = NULL, lease_principal = NULL, lease_generation = NULL,
         lease_acquired_at = NULL, lease_expires_at = NULL
       WHERE name = :environment AND ${LIVE_LEASE_OF_CALLER}`,
      p,
    );
    const refused = released ? null : await leaseNotHeld(m, p);
    // R37: the head ticket, if any, is granted in the transaction that frees the environment.
    await this.handOffLease(tx, p.environment, p.now);
    if (refused) throw refused;
    await expireProposals(tx, p.now, p.environment);
  }

  // The lease queue (DESIGN §17, R37–R39). Every writer of an environment's tickets first
  // takes the environment's row (handOffLease), so the tickets of one environment change one
  // transaction at a time, and ids grow in commit order.

  /**
   * Takes the environment's row, stores EXPIRED for WAITING tickets whose time has come
   * (R39), and, if the environment has no live lease, grants it to the head ticket (R37).
   * Holds whatever the caller then decides. Returns the ticket granted, if one was.
   */
  async handOffLease(
    tx: DecisionTx,
    environment: string,
    now: number,
  ): Promise<{ expired: number; granted: LeaseTicket | null }> {
    const m = tx.manager;
    // Sent together (one round trip on PostgreSQL), run in this order: without the
    // environment's row the other two find nothing to change.
    const [held, expired, granted] = await Promise.all([
      takeEnvironmentRow(m, environment),
      updateReturning<{ id: number | string }>(
        m,
        `UPDATE lease_tickets SET status = 'EXPIRED', ended_at = :now
       WHERE environment = :environment AND status = 'WAITING' AND expires_at <= :now
       RETURNING id`,
        { environment, now },
      ),
      this.grantHeadTicket(m, environment, now),
    ]);
    if (!held) throw EnvironmentError.notFound(environment);
    for (const { id } of expired) tx.decided({ kind: 'leaseTicketChanged', id: Number(id) });
    return {
      expired: expired.length,
      granted: granted ? await this.recordHeadGrant(tx, environment, now) : null,
    };
  }

  /**
   * R37: one conditional statement grants the environment to the head ticket (the oldest
   * WAITING one not expired) only while no lease is live: a new generation, exactly as
   * acquireLease issues it (R1; STRICT raises the fence, R3), running the ticket's
   * ttlSeconds from now (R39). Once the lease is live, no second ticket can be granted it.
   */
  private grantHeadTicket(m: EntityManager, environment: string, now: number): Promise<number> {
    return execute(
      m,
      `UPDATE environments SET
         ${ISSUE_GENERATION},
         lease_holder = (SELECT t.holder FROM lease_tickets t WHERE t.id = (${HEAD_TICKET})),
         lease_principal = (SELECT t.principal FROM lease_tickets t WHERE t.id = (${HEAD_TICKET})),
         lease_acquired_at = :now,
         lease_expires_at = CAST(:now AS BIGINT)
           + 1000 * (SELECT t.ttl_seconds FROM lease_tickets t WHERE t.id = (${HEAD_TICKET}))
       WHERE name = :environment AND last_issued_generation < ${LAST_GENERATION}
         AND (lease_holder IS NULL OR lease_expires_at <= :now)
         AND EXISTS (${WAITING_TICKETS})`,
      { environment, now },
    );
  }

  /** What grantHeadTicket's statement leaves to record when it granted: the ticket, GRANTED. */
  private async recordHeadGrant(
    tx: DecisionTx,
    environment: string,
    now: number,
  ): Promise<LeaseTicket> {
    const m = tx.manager;
    const env = await readEnvironment(m, environment);
    const generation = env.lastIssuedGeneration;
    // The environment's row is held since handOffLease: the head is the ticket just granted.
    const [marked] = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE lease_tickets SET status = 'GRANTED', granted_at = :now, ended_at = :now,
         generation = :generation
       WHERE status = 'WAITING' AND id = (${HEAD_TICKET})
       RETURNING id`,
      { environment, now, generation },
    );
    const ticket = await findOneOrFail(m, LeaseTicket, { id: Number(marked.id) });
    await this.recordGrant(tx, env, ticket, now);
    tx.decided({
      kind: 'outbox',
      subject: 'leaseTicket',
      type: 'lease.granted',
      ticket,
      actor: 'planfence',
      at: now,
    });
    tx.decided({ kind: 'leaseTicketChanged', id: ticket.id });
    return ticket;
  }

  /**
   * A ticket for the environment's lease: granted at once when no lease is live and none
   * waits, else WAITING until maxWaitSeconds (R39). LATEST first supersedes every WAITING
   * ticket. QUEUE_FULL {max} when maxQueueLength tickets wait.
   */
  async enqueueLease(
    tx: DecisionTx,
    p: {
      environment: string;
      principal: string;
      holder: string;
      ttlSeconds: number;
      maxWaitSeconds: number;
      now: number;
    },
  ): Promise<LeaseTicket> {
    const m = tx.manager;
    await this.handOffLease(tx, p.environment, p.now);
    const superseded = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE lease_tickets SET status = 'SUPERSEDED', ended_at = :now
       WHERE environment = :environment AND status = 'WAITING'
         AND EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
                     AND e.queue_mode = '${QueueMode.LATEST}')
       RETURNING id`,
      p,
    );
    for (const { id } of superseded.sort((a, b) => Number(a.id) - Number(b.id))) {
      const ticket = await findOneOrFail(m, LeaseTicket, { id: Number(id) });
      tx.decided({
        kind: 'outbox',
        subject: 'leaseTicket',
        type: 'lease.superseded',
        ticket,
        actor: p.holder,
        at: p.now,
      });
      tx.decided({ kind: 'leaseTicketChanged', id: ticket.id });
    }
    const [inserted] = await select<{ id: number | string }>(
      m,
      `INSERT INTO lease_tickets (environment, principal, holder, ttl_seconds, status,
         enqueued_at, expires_at)
       SELECT e.name, CAST(:principal AS VARCHAR(63)), CAST(:holder AS VARCHAR(320)),
         CAST(:ttlSeconds AS INTEGER), 'WAITING', CAST(:now AS BIGINT), CAST(:expiresAt AS BIGINT)
       FROM environments e
       WHERE e.name = :environment AND e.last_issued_generation < ${LAST_GENERATION}
         AND (SELECT COUNT(*) FROM lease_tickets t
              WHERE t.environment = :environment AND t.status = 'WAITING') < e.max_queue_length
       RETURNING id`,
      { ...p, expiresAt: p.now + p.maxWaitSeconds * 1000 },
    );
    if (!inserted) {
      const env = await readEnvironment(m, p.environment);
      const exhausted = generationsExhausted(env);
      if (exhausted) throw exhausted;
      throw new QueueError(
        'QUEUE_FULL',
        `${env.maxQueueLength} lease tickets already wait for environment "${env.name}"`,
        { max: env.maxQueueLength },
      );
    }
    if (await this.grantHeadTicket(m, p.environment, p.now))
      await this.recordHeadGrant(tx, p.environment, p.now);
    return findOneOrFail(m, LeaseTicket, { id: Number(inserted.id) });
  }

  /** R39: a WAITING ticket turns CANCELLED; any other is returned as it is. */
  async cancelLeaseTicket(tx: DecisionTx, p: { id: number; now: number }): Promise<LeaseTicket> {
    const m = tx.manager;
    const ticket = await findOne(m, LeaseTicket, { id: p.id });
    if (!ticket) throw QueueError.ticketNotFound(p.id);
    await this.handOffLease(tx, ticket.environment, p.now);
    const cancelled = await execute(
      m,
      `UPDATE lease_tickets SET status = 'CANCELLED', ended_at = :now
       WHERE id = :id AND status = 'WAITING'`,
      p,
    );
    if (cancelled) tx.decided({ kind: 'leaseTicketChanged', id: p.id });
    return findOneOrFail(m, LeaseTicket, { id: p.id });
  }

  /**
   * What a grant's statement leaves to record, for an acquire and a queue's hand-off alike:
   * the grant of the generation it issued (R4: to whom), the proposals whose time has come
   * (R16) and, where the grant raised the fence (STRICT, R3), the proposals now below it (R8).
   */
  private async recordGrant(
    tx: DecisionTx,
    env: Environment,
    to: { principal: string; holder: string },
    now: number,
  ): Promise<void> {
    const m = tx.manager;
    // Sent together (one round trip on PostgreSQL), run in this order.
    const [, expired] = await Promise.all([
      insertRow(m, LeaseGrant, {
        environment: env.name,
        generation: env.lastIssuedGeneration,
        principal: to.principal,
        holder: to.holder,
        acquiredAt: now,
      }),
      expiringProposals(m, now, env.name),
      // A MONOTONIC grant moves no fence: there the statement finds nothing to mark.
      markObsolete(m, env.name),
    ]);
    await announceExpired(tx, expired, now);
  }
}
