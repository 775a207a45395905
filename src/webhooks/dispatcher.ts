import { createHmac, randomUUID } from 'node:crypto';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import type { EntityManager } from 'typeorm';
import { Clock } from '../common/clock.js';
import { CONFIG } from '../config/config.module.js';
import type { Config, WebhooksConfig } from '../config/config.js';
import { Database, execute, integerList, select, updateReturning } from '../database/database.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { eventBody, type EventType, type StoredEvent } from '../outbox/outbox-event.js';
import { Outbox } from '../outbox/outbox.service.js';
import { slackText } from './slack.js';
import { WebhookFormat } from './webhook.model.js';

/** A claim outlives its request's time-out by this much (the outcome is still being recorded). */
const CLAIM_MARGIN_MS = 15_000;

/** Key of the PostgreSQL advisory lock that orders queueing deliveries and finishing heads. */
const LINES_LOCK = 4_711_2027;

/** Events fanned out per transaction, and batches per look. */
const FAN_OUT_BATCH = 500;
const MAX_FAN_OUT_BATCHES = 20;

/** A commit that recorded events wakes the dispatcher this much later (bursts share one look). */
const WAKE_AFTER_COMMIT_MS = 5;

/** Requests in flight at once, slow ones included, as a multiple of the concurrency. */
const MAX_IN_FLIGHT_FACTOR = 8;

/** At most this much of a receiver's answer is read (and then dropped). */
const MAX_RESPONSE_BYTES = 4096;

/** Requests in flight (live claims) of delivery `d`'s webhook, on every instance. */
const IN_FLIGHT_OF_WEBHOOK = `(SELECT COUNT(*) FROM webhook_deliveries c
   WHERE c.webhook_id = d.webhook_id AND c.status = 'PENDING' AND c.claimed_until >= :now)`;

/** One claimed attempt: the delivery, its webhook and its event. */
interface Attempt {
  id: number;
  webhookId: string;
  attempts: number;
  retryFrom: number;
  url: string;
  format: WebhookFormat;
  secret: string;
  event: StoredEvent;
}

interface AttemptRow {
  id: number | string;
  webhook_id: string;
  attempts: number | string;
  retry_from: number | string;
  url: string;
  format: string;
  secret: string;
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

const numberOrNull = (value: number | string | null): number | null =>
  value == null ? null : Number(value);

/** `Planfence-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` (R23). */
export function signature(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** The request body of a delivery in its webhook's format. */
export function requestBody(format: WebhookFormat, event: StoredEvent): string {
  return format === WebhookFormat.SLACK
    ? JSON.stringify({ text: slackText(event) })
    : JSON.stringify(eventBody(event));
}

/** Random(0, min(max, base · 2^(attempts−1))): exponential back-off with full jitter. */
export function backoffMs(config: WebhooksConfig, attempts: number): number {
  const ceiling = Math.min(
    config.backoffMaxMs,
    config.backoffBaseMs * 2 ** Math.min(attempts - 1, 40),
  );
  return Math.floor(Math.random() * ceiling);
}

/** A short, truthful reason for a failed request (no stack, no body). */
function reasonOf(error: unknown, timeoutMs: number): string {
  const e = error as {
    name?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError')
    return `timed out after ${timeoutMs} ms`;
  const code = e?.cause?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host lookup failed',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    UND_ERR_SOCKET: 'connection closed',
    UND_ERR_HEADERS_TIMEOUT: `timed out after ${timeoutMs} ms`,
  };
  const text = (code && known[code]) ?? code ?? e?.cause?.message ?? e?.message ?? String(error);
  return text.slice(0, 200);
}

/**
 * Sends what the outbox queued (docs/design.md R23): at least once, and per (webhook, environment)
 * strictly in id order, which is commit order. Only the head of a line (no PENDING delivery
 * of the same webhook and environment with a lower id) is ever claimed, so a delivery waits
 * until the one before it was delivered or given up (FAILED). Lines proceed in parallel up
 * to the configured concurrency.
 *
 * Fairness: a request in flight longer than `slowAfterMs` (a receiver that is slow or
 * never answers) stops holding one of the `concurrency` slots, so new heads are claimed
 * beside it, up to 8 × concurrency requests in flight; one webhook never has more than
 * `concurrency` of them; and among due heads, those of the webhooks with the fewest
 * requests in flight are claimed first, then by id. So webhooks that hang cost their own
 * lines time, not the other webhooks'.
 *
 * An attempt is claimed by one conditional UPDATE (claimed_by = this instance, until the
 * request's time-out plus a margin, attempts + 1); on PostgreSQL the candidate rows are
 * locked with FOR UPDATE SKIP LOCKED, so instances never claim the same attempt, and a
 * claim that outlives a crashed instance expires. The request runs outside any transaction;
 * its outcome is recorded only while this instance still holds the claim.
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Webhooks');
  /** This process's claims carry this id. */
  readonly instanceId = randomUUID();
  private readonly config: WebhooksConfig;
  private readonly inFlight = new Map<number, Promise<void>>();
  /** When each request in flight started (performance.now()). */
  private readonly startedAt = new Map<number, number>();
  private slowTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private again = false;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The last problem of the loop itself, logged once until it changes or clears. */
  private loopProblem: string | null = null;
  /** Whether this process ever claimed an attempt (else it has no claim to release). */
  private claimedAny = false;
  private readonly outcomes: Counter<'outcome'>;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly outbox: Outbox,
    @Inject(CONFIG) config: Config,
    metrics: MetricsService,
  ) {
    this.config = config.webhooks;
    this.outcomes = new Counter({
      name: 'planfence_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered (2xx), retry (failed, tried again later), failed (given up)',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
    for (const outcome of ['delivered', 'retry', 'failed']) this.outcomes.inc({ outcome }, 0);
    const pending = () => this.pendingStats();
    new Gauge({
      name: 'planfence_outbox_lag_seconds',
      help: 'Age of the oldest PENDING webhook delivery (since it was queued or redelivered); 0 when none waits',
      registers: [metrics.registry],
      async collect() {
        this.set((await pending()).lagSeconds);
      },
    });
    new Gauge({
      name: 'planfence_webhook_deliveries_pending',
      help: 'Webhook deliveries PENDING (waiting, backing off or in flight)',
      registers: [metrics.registry],
      async collect() {
        this.set((await pending()).count);
      },
    });
  }

  private scrape: Promise<{ count: number; lagSeconds: number }> | null = null;

  private pendingStats(): Promise<{ count: number; lagSeconds: number }> {
    this.scrape ??= (async () => {
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
    })().finally(() => {
      this.scrape = null;
    });
    return this.scrape;
  }

  onApplicationBootstrap(): void {
    // Commits come in bursts: one look a few milliseconds after the first of them serves all.
    this.unsubscribe = this.outbox.onRecorded(() => {
      if (this.soon) return;
      this.soon = setTimeout(() => {
        this.soon = undefined;
        this.wake();
      }, WAKE_AFTER_COMMIT_MS);
    });
    this.timer = setInterval(() => this.wake(), this.config.pollMs);
    this.timer.unref();
    this.wake();
  }

  /**
   * Shutdown: no new claims; the requests in flight finish (each within its time-out) and
   * record their outcome; claims still held are released so that the next start (or another
   * instance) takes them at once.
   */
  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    clearTimeout(this.soon);
    clearTimeout(this.slowTimer);
    this.unsubscribe?.();
    await this.running;
    await Promise.allSettled([...this.inFlight.values()]);
    if (!this.claimedAny) return;
    await this.db
      .write((m) =>
        execute(
          m,
          `UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL
           WHERE claimed_by = :me`,
          { me: this.instanceId },
        ),
      )
      .catch((error: unknown) =>
        this.logger.warn(`could not release webhook claims: ${(error as Error).message}`),
      );
  }

  /** Looks for due deliveries now (new ones, a redelivery, a line whose head just finished). */
  wake(): void {
    if (this.stopping) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.fill()
      .then(
        () => {
          if (this.loopProblem) this.logger.log('webhook dispatch resumed');
          this.loopProblem = null;
        },
        (error: unknown) => {
          const problem = error instanceof Error ? error.message : String(error);
          if (problem !== this.loopProblem) this.logger.error(`webhook dispatch: ${problem}`);
          this.loopProblem = problem;
        },
      )
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** The deliveries whose request this process makes now: never claimed a second time meanwhile. */
  private inFlightIds(): string {
    return JSON.stringify([...this.inFlight.keys()]);
  }

  /**
   * Queues the deliveries of the events recorded since the last look, a batch per
   * transaction. A read first: with no webhook, or nothing new, nothing is written.
   */
  private async fanOut(): Promise<void> {
    for (let batch = 0; batch < MAX_FAN_OUT_BATCHES; batch++) {
      const [waiting] = await this.db.read((m) =>
        select(
          m,
          `SELECT e.id FROM outbox_events e WHERE e.fanned_out = 0
             AND EXISTS (SELECT 1 FROM webhooks) LIMIT 1`,
        ),
      );
      if (!waiting) return;
      const taken = await this.db.write(async (m) => {
        await this.lockLines(m);
        return this.outbox.fanOut(m, await this.clock.now(m), FAN_OUT_BATCH);
      });
      if (taken < FAN_OUT_BATCH) return;
    }
  }

  /** Slots free now: requests in flight longer than `slowAfterMs` hold none, within the overall cap. */
  private freeSlots(): number {
    const now = performance.now();
    let holding = 0;
    for (const started of this.startedAt.values())
      if (now - started < this.config.slowAfterMs) holding++;
    return Math.min(
      this.config.concurrency - holding,
      this.config.concurrency * MAX_IN_FLIGHT_FACTOR - this.inFlight.size,
    );
  }

  /** Claims as many due heads of lines as there are free slots and starts their requests. */
  private async fill(): Promise<void> {
    await this.fanOut();
    const free = this.freeSlots();
    // A shutdown that began while this look was under way: no new request.
    if (free <= 0 || this.stopping) return;
    // A read first: a poll that finds nothing due writes nothing.
    const now = await this.clock.now();
    const [due] = await this.db.read((m) =>
      select(m, `SELECT d.id FROM webhook_deliveries d WHERE ${this.claimable()} LIMIT 1`, {
        now,
        me: this.instanceId,
        inFlight: this.inFlightIds(),
      }),
    );
    if (!due || this.stopping) return;
    const attempts = await this.claim(free);
    for (const attempt of attempts) {
      const done = this.attempt(attempt)
        .catch((error: unknown) =>
          this.logger.error(`webhook delivery ${attempt.id}: ${(error as Error).message}`),
        )
        .finally(() => {
          this.inFlight.delete(attempt.id);
          this.startedAt.delete(attempt.id);
          this.wake();
        });
      this.inFlight.set(attempt.id, done);
      this.startedAt.set(attempt.id, performance.now());
    }
    // Once these turn slow, their slots are free for other lines: look again then.
    if (attempts.length && !this.slowTimer) {
      this.slowTimer = setTimeout(() => {
        this.slowTimer = undefined;
        this.wake();
      }, this.config.slowAfterMs + 1);
      this.slowTimer.unref();
    }
  }

  private async claim(limit: number): Promise<Attempt[]> {
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
           ORDER BY ${IN_FLIGHT_OF_WEBHOOK}, d.id
           LIMIT :limit
           ${lock})
         RETURNING id`,
        {
          me: this.instanceId,
          until: now + this.config.timeoutMs + CLAIM_MARGIN_MS,
          now,
          limit,
          perWebhook: this.config.concurrency,
          inFlight: this.inFlightIds(),
        },
      );
      if (!claimed.length) return [];
      this.claimedAny = true;
      return this.attemptsOf(
        m,
        claimed.map((row) => Number(row.id)),
      );
    });
    return rows.map((row) => ({
      id: Number(row.id),
      webhookId: row.webhook_id,
      attempts: Number(row.attempts),
      retryFrom: Number(row.retry_from),
      url: row.url,
      format: row.format as WebhookFormat,
      secret: row.secret,
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
    }));
  }

  /**
   * Delivery `d` may be claimed now: PENDING, due, not claimed (or its claim expired), and
   * the head of its (webhook, environment) line. On SQLite one process owns the file, so a
   * claim of another process id is one that an earlier process left behind.
   */
  private claimable(): string {
    const unclaimed =
      this.db.dialect === 'sqlite'
        ? '(d.claimed_by IS NULL OR d.claimed_by <> :me OR d.claimed_until < :now)'
        : '(d.claimed_until IS NULL OR d.claimed_until < :now)';
    return `d.status = 'PENDING' AND d.next_attempt_at <= :now AND ${unclaimed}
      AND d.id NOT IN (${integerList(this.db.dialect, 'inFlight')})
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
                      WHERE e.webhook_id = d.webhook_id AND e.environment = d.environment
                        AND e.status = 'PENDING' AND e.id < d.id)`;
  }

  private attemptsOf(m: EntityManager, ids: number[]): Promise<AttemptRow[]> {
    return select<AttemptRow>(
      m,
      `SELECT d.id, d.webhook_id, d.attempts, d.retry_from, w.url, w.format, w.secret, e.id AS event_id,
         e.environment, e.type, e.at, e.generation, e.sequence, e.plan_id,
         e.deployment_sequence, e.actor, e.data
       FROM webhook_deliveries d
       JOIN webhooks w ON w.id = d.webhook_id
       JOIN outbox_events e ON e.id = d.event_id
       WHERE d.id IN (${integerList(this.db.dialect, 'ids')})
       ORDER BY d.id`,
      { ids: JSON.stringify(ids) },
    );
  }

  /** One request and the record of its outcome. */
  private async attempt(attempt: Attempt): Promise<void> {
    const error = await this.send(attempt);
    const now = await this.clock.now();
    if (error === null) {
      const recorded = await this.db.write(async (m) => {
        await this.lockLines(m);
        const finished = await execute(
          m,
          `UPDATE webhook_deliveries
           SET status = 'DELIVERED', delivered_at = :now, last_error = NULL,
               next_attempt_at = NULL, claimed_by = NULL, claimed_until = NULL
           WHERE id = :id AND claimed_by = :me AND status = 'PENDING'`,
          { id: attempt.id, now, me: this.instanceId },
        );
        if (finished) await this.nextInLine(m, attempt, now);
        return finished;
      });
      if (recorded) this.outcomes.inc({ outcome: 'delivered' });
      this.logger.debug(`webhook delivery ${attempt.id} (${attempt.event.type}) delivered`);
      return;
    }
    const givenUp =
      attempt.attempts >= this.config.maxAttempts ||
      now - attempt.retryFrom >= this.config.maxAgeMs;
    const next = givenUp ? null : now + backoffMs(this.config, attempt.attempts);
    const recorded = await this.db.write(async (m) => {
      if (givenUp) await this.lockLines(m);
      const changed = await execute(
        m,
        `UPDATE webhook_deliveries
         SET status = :status, last_error = :error, next_attempt_at = :next,
             claimed_by = NULL, claimed_until = NULL
         WHERE id = :id AND claimed_by = :me AND status = 'PENDING'`,
        {
          id: attempt.id,
          status: givenUp ? 'FAILED' : 'PENDING',
          error,
          next,
          me: this.instanceId,
        },
      );
      if (changed && givenUp) await this.nextInLine(m, attempt, now);
      return changed;
    });
    if (!recorded) return;
    this.outcomes.inc({ outcome: givenUp ? 'failed' : 'retry' });
    const host = hostOf(attempt.url);
    this.logger.warn(
      givenUp
        ? `webhook delivery ${attempt.id} to ${host} FAILED after ${attempt.attempts} attempts: ${error}`
        : `webhook delivery ${attempt.id} to ${host} attempt ${attempt.attempts} failed: ${error}; next in ${Math.round((next! - now) / 1000)} s`,
    );
  }

  /**
   * PostgreSQL: one transaction at a time, of any instance, queues deliveries (fanOut) or
   * finishes the head of a line, so that a delivery queued meanwhile is either seen by
   * nextInLine or made due by the fan-out itself, and delivery ids follow the events' order.
   * (SQLite runs one write transaction at a time anyway.)
   */
  private async lockLines(m: EntityManager): Promise<void> {
    if (this.db.dialect !== 'postgres') return;
    await select(m, 'SELECT pg_advisory_xact_lock(:key) AS locked', { key: LINES_LOCK });
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

  /** Sends the request; null when the receiver answered 2xx, else why not. */
  private async send(attempt: Attempt): Promise<string | null> {
    const body = requestBody(attempt.format, attempt.event);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'planfence',
      'planfence-event': attempt.event.type,
      'planfence-delivery': String(attempt.id),
      'planfence-signature': signature(attempt.secret, body, Math.floor(Date.now() / 1000)),
    };
    try {
      const response = await fetch(attempt.url, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.config.timeoutMs),
      });
      await drain(response);
      if (response.status >= 200 && response.status < 300) return null;
      return `HTTP ${response.status}`;
    } catch (error) {
      return reasonOf(error, this.config.timeoutMs);
    }
  }
}

/** Reads at most MAX_RESPONSE_BYTES of the answer and drops the rest. */
async function drain(response: Response): Promise<void> {
  if (!response.body) return;
  let read = 0;
  try {
    // Leaving the loop early cancels the rest of the stream.
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      read += chunk.byteLength;
      if (read >= MAX_RESPONSE_BYTES) break;
    }
  } catch {
    // The status is what counts; a body cut short changes nothing.
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}
