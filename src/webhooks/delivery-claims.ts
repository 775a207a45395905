import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Clock } from '../common/clock.js';
import { Database, execute, jsonList, select, updateReturning } from '../database/database.js';
import type { EventType } from '../outbox/outbox-event.js';
import { Outbox } from '../outbox/outbox.service.js';
import type { WebhookFormat } from './webhook.model.js';
import type { WebhookRequest } from './webhook-request.js';

/** Key of the PostgreSQL advisory lock that orders queueing deliveries and finishing heads. */
const LINES_LOCK = 4_711_2027;

/** Requests in flight (live claims) of delivery `d`'s webhook, on every instance. */
const IN_FLIGHT_OF_WEBHOOK = `(SELECT COUNT(*) FROM webhook_deliveries c
   WHERE c.webhook_id = d.webhook_id AND c.status = 'PENDING' AND c.claimed_until >= :now)`;

/** One claimed attempt: the delivery, its webhook and its event. */
export interface Attempt extends WebhookRequest {
  webhookId: string;
  attempts: number;
  retryFrom: number;
}

interface AttemptRow {
  id: number | string;
  webhook_id: string;
  attempts: number | string;
  retry_from: number | string;
  url: string;
  format: string;
  secret: string;
  batch_size: number | string;
  event_id: number | string;
  environment: string;
  type: string;
  at: number | string;
  generation: number | string | null;
  sequence: number | string | null;
  plan_id: string | null;
  deployment_sequence: number | string | null;
  actor: string | null;
  data: string;
}

/** What the dispatcher asks of a claim: whose it is, how long it lasts, what is excluded. */
export interface ClaimTerms {
  /** This process's instance id. */
  me: string;
  /**
   * How long a claim lasts: the request's time-out plus PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS,
   * while the outcome is still being recorded. Until then no other instance sends the delivery.
   */
  claimMs: number;
  /** Deliveries whose request this process makes now (never claimed a second time meanwhile). */
  inFlight: number[];
}

const ATTEMPT_COLUMNS = `d.id, d.webhook_id, d.attempts, d.retry_from, w.url, w.format, w.secret,
  w.batch_size,
  e.id AS event_id, e.environment, e.type, e.at, e.generation, e.sequence, e.plan_id,
  e.deployment_sequence, e.actor, e.data`;

const numberOrNull = (value: number | string | null): number | null =>
  value == null ? null : Number(value);

function attemptOf(row: AttemptRow): Attempt {
  return {
    id: Number(row.id),
    webhookId: row.webhook_id,
    attempts: Number(row.attempts),
    retryFrom: Number(row.retry_from),
    url: row.url,
    format: row.format as WebhookFormat,
    secret: row.secret,
    batchSize: Number(row.batch_size),
    event: {
      id: String(row.event_id),
      environment: row.environment,
      type: row.type as EventType,
      at: Number(row.at),
      generation: numberOrNull(row.generation),
      sequence: numberOrNull(row.sequence),
      planId: row.plan_id,
      deploymentSequence: numberOrNull(row.deployment_sequence),
      actor: row.actor,
      data: JSON.parse(row.data) as unknown,
    },
  };
}

/**
 * Every statement on webhook deliveries the dispatcher runs: queueing (through the outbox),
 * claiming heads of lines, recording outcomes and going on with a line, releasing claims,
 * and the numbers of the metrics. Each decision is one conditional statement whose affected
 * rows decide; a claim is held by an instance id until a time.
 */
@Injectable()
export class DeliveryClaims {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly outbox: Outbox,
  ) {}

  /** The service clock now (the database's on PostgreSQL unless a clock is set). */
  now(): Promise<number> {
    return this.clock.now();
  }

  /**
   * Queues the deliveries of the next `limit` events not yet fanned out, in one transaction,
   * and returns how many events it took. A read first: with no webhook, or nothing new,
   * nothing is written.
   */
  async fanOut(limit: number): Promise<{ webhooks: boolean; events: number }> {
    const [seen] = await this.db.read((m) =>
      select<{ webhooks: unknown; waiting: unknown }>(
        m,
        `SELECT EXISTS (SELECT 1 FROM webhooks) AS webhooks,
           EXISTS (SELECT 1 FROM outbox_events e WHERE e.fanned_out = 0) AS waiting`,
      ),
    );
    const webhooks = Boolean(Number(seen.webhooks));
    if (!webhooks || !Number(seen.waiting)) return { webhooks, events: 0 };
    const events = await this.db.write(async (m) => {
      await this.lockLines(m);
      return this.outbox.fanOut(m, await this.clock.now(m), limit);
    });
    return { webhooks, events };
  }

  /** Whether some head of a line may be claimed now (a read: a poll that finds none writes nothing). */
  async anyDue(terms: ClaimTerms): Promise<boolean> {
    const now = await this.clock.now();
    const [due] = await this.db.read((m) =>
      select(m, `SELECT d.id FROM webhook_deliveries d WHERE ${this.claimable()} LIMIT 1`, {
        now,
        me: terms.me,
        inFlight: JSON.stringify(terms.inFlight),
      }),
    );
    return due !== undefined;
  }

  /**
   * Claims up to `limit` due heads of lines, at most `perWebhook` live claims per webhook;
   * one conditional UPDATE (on PostgreSQL over rows locked FOR UPDATE SKIP LOCKED). Order:
   * first attempts before retries (a head with `attempts > 0` is a line whose receiver failed
   * it: however many such lines are due, a healthy line's new delivery is claimed at the next
   * free slot), then the webhooks with the fewest live claims, then by id.
   */
  async claimHeads(terms: ClaimTerms, limit: number, perWebhook: number): Promise<Attempt[]> {
    const lock = this.db.dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '';
    const rows = await this.db.write(async (m) => {
      const now = await this.clock.now(m);
      const claimed = await updateReturning<{ id: number | string }>(
        m,
        `UPDATE webhook_deliveries
         SET claimed_by = :me, claimed_until = :until, attempts = attempts + 1,
             last_attempt_at = :now
         WHERE id IN (
           SELECT d.id FROM webhook_deliveries d
           WHERE ${this.claimable()}
             AND ${IN_FLIGHT_OF_WEBHOOK} < :perWebhook
           ORDER BY CASE WHEN d.attempts > 0 THEN 1 ELSE 0 END, ${IN_FLIGHT_OF_WEBHOOK}, d.id
           LIMIT :limit
           ${lock})
         RETURNING id`,
        {
          me: terms.me,
          until: now + terms.claimMs,
          now,
          limit,
          perWebhook,
          inFlight: JSON.stringify(terms.inFlight),
        },
      );
      if (!claimed.length) return [];
      return select<AttemptRow>(
        m,
        `SELECT ${ATTEMPT_COLUMNS}
         FROM webhook_deliveries d
         JOIN webhooks w ON w.id = d.webhook_id
         JOIN outbox_events e ON e.id = d.event_id
         WHERE d.id IN (${jsonList(this.db.dialect, 'ids', 'integer')})
         ORDER BY d.id`,
        { ids: JSON.stringify(claimed.map((row) => Number(row.id))) },
      );
    });
    return rows.map(attemptOf);
  }

  /**
   * A webhook that takes batches: claims for `me` up to `count` of the deliveries that follow
   * the claimed head `head` in its line (those in a row after it, free and not backing off),
   * to be sent in one request with it. None when the head is no longer its line's first
   * PENDING delivery (one before it was redelivered).
   */
  async claimFollowing(head: Attempt, terms: ClaimTerms, count: number): Promise<Attempt[]> {
    return this.db.write(async (m) =>
      this.claimRun(m, head, terms, await this.clock.now(m), count, head.id),
    );
  }

  /**
   * Records that the request of `sent` (a line's claimed head, then the deliveries that
   * followed it in the same request, if any) was answered 2xx: DELIVERED, only while `me`
   * still holds their claims; and, in the same transaction, goes on with the line: with
   * `run` > 0, and all of `sent` recorded, the line's next PENDING deliveries, up to `run` of
   * them, are claimed for `me` together (those in a row from the first, which must be free
   * and not backing off) and returned in order, to be sent after it (see membersDelivered
   * and endRun). Otherwise, or when none could be claimed, the line's next delivery is only
   * made due, for any instance to claim. `recorded`: how many of `sent` were recorded (0:
   * the head's claim was lost, expired and taken, or the webhook deleted).
   */
  async delivered(
    sent: readonly Attempt[],
    terms: ClaimTerms,
    run: number,
  ): Promise<{ recorded: number; members: Attempt[] }> {
    const [head, ...following] = sent;
    return this.db.write(async (m) => {
      await this.lockLines(m);
      const now = await this.clock.now(m);
      if (!(await this.markDelivered(m, [head], terms.me, now, false)))
        return { recorded: 0, members: [] };
      const recorded =
        1 + (following.length ? await this.markDelivered(m, following, terms.me, now, true) : 0);
      const members =
        run > 0 && recorded === sent.length
          ? await this.claimRun(m, head, terms, now, run, null)
          : [];
      // The line's next delivery is due (claimed here when it is the run's first member),
      // so that a crash in the run leaves the line to a restart or another instance.
      await this.nextInLine(m, head, now);
      return { recorded, members };
    });
  }

  /**
   * DELIVERED, only while `me` holds the claims of the PENDING deliveries `sent`;
   * `countAttempt` for a run's members and a head's followers, whose attempt is counted
   * when its outcome is recorded (a head's was counted when it was claimed). How many were
   * recorded.
   */
  private async markDelivered(
    m: EntityManager,
    sent: readonly Attempt[],
    me: string,
    now: number,
    countAttempt: boolean,
  ): Promise<number> {
    const counted = countAttempt ? 'attempts = attempts + 1, last_attempt_at = :now,' : '';
    return execute(
      m,
      `UPDATE webhook_deliveries
       SET status = 'DELIVERED', delivered_at = :now, last_error = NULL, ${counted}
           next_attempt_at = NULL, claimed_by = NULL, claimed_until = NULL
       WHERE ${sent.length === 1 ? 'id = :id' : `id IN (${jsonList(this.db.dialect, 'ids', 'integer')})`}
         AND claimed_by = :me AND status = 'PENDING'`,
      { id: sent[0].id, ids: JSON.stringify(sent.map((a) => a.id)), now, me },
    );
  }

  /**
   * Records that a request of a run's members (consecutive deliveries of one line) was
   * answered 2xx: DELIVERED, their attempt counted (a member's attempt is counted when its
   * outcome is recorded, not when it was claimed). Only while `me` holds their claims; how
   * many were recorded. The line's next delivery is made due and, when it is this run's
   * next member, its claim renewed.
   */
  async membersDelivered(sent: readonly Attempt[], terms: ClaimTerms): Promise<number> {
    const me = terms.me;
    const last = sent[sent.length - 1];
    return this.db.write(async (m) => {
      await this.lockLines(m);
      const now = await this.clock.now(m);
      const recorded = await this.markDelivered(m, sent, me, now, true);
      if (!recorded) return 0;
      // The next one is due (for a restart or another instance, should this one die), and
      // its claim lasts from now, since it is being sent now.
      await this.nextInLine(m, last, now);
      await execute(
        m,
        `UPDATE webhook_deliveries SET claimed_until = :until
         WHERE claimed_by = :me AND status = 'PENDING'
           AND id = (SELECT MIN(id) FROM webhook_deliveries
                     WHERE webhook_id = :webhookId AND environment = :environment
                       AND status = 'PENDING')`,
        {
          me,
          until: now + terms.claimMs,
          webhookId: last.webhookId,
          environment: last.event.environment,
        },
      );
      return recorded;
    });
  }

  /**
   * Records a failed attempt: PENDING again with its next attempt at `next`, or FAILED
   * (`next` null) and then the line's next delivery is due. Only while `me` holds the claim.
   * `member`: a run's member, whose attempt is counted now.
   */
  async failed(
    attempt: Attempt,
    me: string,
    error: string,
    next: number | null,
    member = false,
  ): Promise<boolean> {
    const givenUp = next === null;
    return this.db.write(async (m) => {
      if (givenUp) await this.lockLines(m);
      const now = await this.clock.now(m);
      const changed = await execute(
        m,
        member
          ? `UPDATE webhook_deliveries
             SET status = :status, last_error = :error, next_attempt_at = :next,
                 attempts = attempts + 1, last_attempt_at = :now,
                 claimed_by = NULL, claimed_until = NULL
             WHERE id = :id AND claimed_by = :me AND status = 'PENDING'`
          : `UPDATE webhook_deliveries
             SET status = :status, last_error = :error, next_attempt_at = :next,
                 claimed_by = NULL, claimed_until = NULL
             WHERE id = :id AND claimed_by = :me AND status = 'PENDING'`,
        { id: attempt.id, status: givenUp ? 'FAILED' : 'PENDING', error, next, me, now },
      );
      if (changed && givenUp) await this.nextInLine(m, attempt, now);
      return changed > 0;
    });
  }

  /**
   * A run of `line`'s line ended (all sent, a failure, a shutdown): the claims `me` holds on
   * its members not sent (`unsent`) are released, and the line's next PENDING delivery is
   * due now unless it backs off, for any instance to claim.
   */
  async endRun(line: Attempt, me: string, unsent: number[]): Promise<void> {
    await this.db.write(async (m) => {
      await this.lockLines(m);
      const now = await this.clock.now(m);
      if (unsent.length)
        await execute(
          m,
          `UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL
           WHERE id IN (${jsonList(this.db.dialect, 'ids', 'integer')}) AND claimed_by = :me
             AND status = 'PENDING'`,
          { ids: JSON.stringify(unsent), me },
        );
      await this.nextInLine(m, line, now);
    });
  }

  /** Releases every claim `me` still holds (shutdown): the next start or another instance takes them at once. */
  async releaseAll(me: string): Promise<void> {
    await this.db.write((m) =>
      execute(
        m,
        `UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL
         WHERE claimed_by = :me`,
        { me },
      ),
    );
  }

  /** PENDING deliveries, and the age of the oldest (since it was queued or redelivered). */
  async pendingStats(): Promise<{ count: number; lagSeconds: number }> {
    const now = await this.clock.now();
    const [row] = await this.db.read((m) =>
      select<{ count: number | string; oldest: number | string | null }>(
        m,
        `SELECT COUNT(*) AS count, MIN(retry_from) AS oldest FROM webhook_deliveries
         WHERE status = 'PENDING'`,
      ),
    );
    const oldest = numberOrNull(row?.oldest ?? null);
    return {
      count: Number(row?.count ?? 0),
      lagSeconds: oldest == null ? 0 : Math.max(0, now - oldest) / 1000,
    };
  }

  /**
   * Delivery `d` may be claimed now: PENDING, due, not claimed (or its claim expired), and
   * the head of its (webhook, environment) line. On SQLite one process owns the file, so a
   * claim of another process id is one that an earlier process left behind.
   */
  private claimable(): string {
    return `d.status = 'PENDING' AND d.next_attempt_at <= :now AND ${this.unclaimed()}
      AND d.id NOT IN (${jsonList(this.db.dialect, 'inFlight', 'integer')})
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
                      WHERE e.webhook_id = d.webhook_id AND e.environment = d.environment
                        AND e.status = 'PENDING' AND e.id < d.id)`;
  }

  private unclaimed(): string {
    return this.db.dialect === 'sqlite'
      ? '(d.claimed_by IS NULL OR d.claimed_by <> :me OR d.claimed_until < :now)'
      : '(d.claimed_until IS NULL OR d.claimed_until < :now)';
  }

  /**
   * Claims up to `run` of the line's next PENDING deliveries for `me` (one conditional
   * UPDATE: each free, not in flight here, not backing off) and keeps those in a row from
   * the line's first; any claimed beyond a gap (the first backs off, or another instance
   * holds it) are released again at once. `held`: the id of the line's head that `me` holds
   * (its followers are claimed): the line's first PENDING delivery must be that one, else
   * none is kept; null: the line's head was just delivered.
   */
  private async claimRun(
    m: EntityManager,
    attempt: Attempt,
    terms: ClaimTerms,
    now: number,
    run: number,
    held: number | null,
  ): Promise<Attempt[]> {
    const line = {
      webhookId: attempt.webhookId,
      environment: attempt.event.environment,
      limit: run + (held === null ? 0 : 1),
    };
    const claimed = await updateReturning<{ id: number | string }>(
      m,
      `UPDATE webhook_deliveries
       SET claimed_by = :me, claimed_until = :until
       WHERE id IN (SELECT x.id FROM webhook_deliveries x
                    WHERE x.webhook_id = :webhookId AND x.environment = :environment
                      AND x.status = 'PENDING'
                    ORDER BY x.id
                    LIMIT :limit)
         AND (next_attempt_at IS NULL OR next_attempt_at <= :now)
         AND id NOT IN (${jsonList(this.db.dialect, 'inFlight', 'integer')})
         AND ${this.unclaimed().replaceAll('d.', '')}
       RETURNING id`,
      {
        ...line,
        now,
        me: terms.me,
        // A member's claim is renewed when the one before it is recorded (membersDelivered).
        until: now + terms.claimMs,
        inFlight: JSON.stringify(terms.inFlight),
      },
    );
    if (!claimed.length) return [];
    const ids = new Set(claimed.map((row) => Number(row.id)));
    const rows = await select<AttemptRow>(
      m,
      `SELECT ${ATTEMPT_COLUMNS}
       FROM webhook_deliveries d
       JOIN webhooks w ON w.id = d.webhook_id
       JOIN outbox_events e ON e.id = d.event_id
       WHERE d.webhook_id = :webhookId AND d.environment = :environment
         AND d.status = 'PENDING'
       ORDER BY d.id
       LIMIT :limit`,
      line,
    );
    const members: Attempt[] = [];
    const from = held === null ? 0 : rows.length && Number(rows[0].id) === held ? 1 : rows.length;
    for (const row of rows.slice(from)) {
      if (!ids.has(Number(row.id))) break;
      members.push(attemptOf(row));
    }
    const kept = new Set(members.map((member) => member.id));
    const beyond = [...ids].filter((id) => !kept.has(id));
    if (beyond.length)
      await execute(
        m,
        `UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL
         WHERE id IN (${jsonList(this.db.dialect, 'ids', 'integer')})`,
        { ids: JSON.stringify(beyond) },
      );
    return members;
  }

  /** The line's head was delivered or given up: the next PENDING delivery of the line is due now. */
  private async nextInLine(m: EntityManager, attempt: Attempt, now: number): Promise<void> {
    await execute(
      m,
      `UPDATE webhook_deliveries SET next_attempt_at = :now
       WHERE id = (SELECT MIN(id) FROM webhook_deliveries
                   WHERE webhook_id = :webhookId AND environment = :environment
                     AND status = 'PENDING')
         AND next_attempt_at IS NULL`,
      { now, webhookId: attempt.webhookId, environment: attempt.event.environment },
    );
  }

  /**
   * PostgreSQL: one transaction at a time, of any instance, queues deliveries (fanOut) or
   * finishes the head of a line, so that a delivery queued meanwhile is either seen by
   * nextInLine / endRun or made due by the fan-out itself, and delivery ids follow the
   * events' order. (SQLite runs one write transaction at a time anyway.)
   */
  private async lockLines(m: EntityManager): Promise<void> {
    if (this.db.dialect !== 'postgres') return;
    await select(m, 'SELECT pg_advisory_xact_lock(:key) AS locked', { key: LINES_LOCK });
  }
}
