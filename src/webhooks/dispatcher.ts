import { randomUUID } from 'node:crypto';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { CONFIG } from '../config/config.module.js';
import type { Config, WebhooksConfig } from '../config/config.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { Outbox } from '../outbox/outbox.service.js';
import { type Attempt, type ClaimTerms, DeliveryClaims } from './delivery-claims.js';
import { hostOf, sendWebhook } from './webhook-request.js';

/** Events fanned out per transaction, and batches per look. */
const FAN_OUT_BATCH = 500;
const MAX_FAN_OUT_BATCHES = 20;

/** A commit that recorded events wakes the dispatcher this much later (bursts share one look). */
const WAKE_AFTER_COMMIT_MS = 5;

/** Requests in flight at once, slow ones included, as a multiple of the concurrency. */
const MAX_IN_FLIGHT_FACTOR = 8;

/**
 * Deliveries of one line sent one after another on one slot before the line goes back to
 * the loop (where heads of other lines that wait are claimed first, fewest requests in
 * flight first, then by id): a line with a steady stream cannot keep its slot for ever.
 */
export const RUN_LENGTH = 32;

/** Random(0, min(max, base · 2^(attempts−1))): exponential back-off with full jitter. */
export function backoffMs(config: WebhooksConfig, attempts: number): number {
  const ceiling = Math.min(
    config.backoffMaxMs,
    config.backoffBaseMs * 2 ** Math.min(attempts - 1, 40),
  );
  return Math.floor(Math.random() * ceiling);
}

/** A (webhook, environment) line's key. */
function lineOf(attempt: Attempt): string {
  return `${attempt.webhookId}\u0000${attempt.event.environment}`;
}

/** The request a run makes now, and when it started (performance.now()). */
interface Current {
  id: number;
  startedAt: number;
}

/**
 * Sends what the outbox queued (docs/design.md R23): at least once, and per (webhook, environment)
 * strictly in id order, which is commit order. Only the head of a line (no PENDING delivery
 * of the same webhook and environment with a lower id) is ever claimed, so a delivery waits
 * until the one before it was delivered or given up (FAILED). Lines proceed in parallel up
 * to the configured concurrency.
 *
 * A line is sent in runs: once a claimed head is delivered, the transaction that records it
 * also claims the line's next deliveries (up to RUN_LENGTH − 1 requests' worth) for this
 * instance, and the run sends them one request after another on the same kept-alive
 * connection, each once the one before it was answered 2xx; their outcomes are recorded one
 * transaction per request beside the requests (so a run waits for no commit between two deliveries, and SQLite's group commit
 * takes many outcomes at once). A failed attempt (retry or FAILED) ends the run: the failed
 * delivery stays the head of its line, and nothing after it is sent before it. A run ends
 * too after RUN_LENGTH deliveries, when one of its line's deliveries is redelivered here,
 * or when the service stops; then the claims on what it did not send are released and
 * the line's next delivery is due for the loop (any instance) to claim. After a crash in a
 * run, a delivery answered 2xx whose record had not committed yet is sent again (at least
 * once, same delivery id) before the ones after it.
 *
 * Fairness: a request in flight longer than `slowAfterMs` (a receiver that is slow or
 * never answers) stops holding one of the `concurrency` slots, so new heads are claimed
 * beside it, up to 8 × concurrency requests in flight; one webhook never has more than
 * `concurrency` of them; and among due heads, those of the webhooks with the fewest
 * requests in flight are claimed first, then by id. So webhooks that hang cost their own
 * lines time, not the other webhooks'.
 *
 * The statements are in DeliveryClaims (a claim is one conditional UPDATE; on
 * PostgreSQL over rows locked FOR UPDATE SKIP LOCKED, so instances never claim the same
 * attempt, and a claim that outlives a crashed instance expires); the request in
 * webhook-request.ts. The request runs outside any transaction; its outcome is recorded
 * only while this instance still holds the claim.
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Webhooks');
  /** This process's claims carry this id. */
  readonly instanceId = randomUUID();
  private readonly config: WebhooksConfig;
  /** Runs under way, by the id of the delivery each began with. */
  private readonly inFlight = new Map<number, Promise<void>>();
  /** The request each run makes now. */
  private readonly current = new Map<number, Current>();
  /** Per line (lineOf), how often one of its deliveries was put back: a run stops when it changes. */
  private readonly lineVersions = new Map<string, number>();
  private slowTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private again = false;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The last problem of the loop itself, logged once until it changes or clears. */
  private loopProblem: string | null = null;
  /**
   * Whether the last look saw a webhook. While none exists a commit wakes no look: there is
   * nothing to fan out or send, and the poll still looks every pollMs (so a webhook another
   * instance creates is seen within it; one created here wakes this dispatcher at once).
   */
  private webhooksSeen = true;
  /** Whether this process ever claimed an attempt (else it has no claim to release). */
  private claimedAny = false;
  private readonly outcomes: Counter<'outcome'>;

  constructor(
    private readonly deliveries: DeliveryClaims,
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
    this.scrape ??= this.deliveries.pendingStats().finally(() => {
      this.scrape = null;
    });
    return this.scrape;
  }

  onApplicationBootstrap(): void {
    // Commits come in bursts: one look a few milliseconds after the first of them serves all.
    this.unsubscribe = this.outbox.onRecorded(() => {
      if (this.soon || !this.webhooksSeen) return;
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
   * Shutdown: no new claims, no run goes on; the requests in flight finish (each within its
   * time-out) and record their outcome; claims still held are released so that the next
   * start (or another instance) takes them at once.
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
    await this.deliveries
      .releaseAll(this.instanceId)
      .catch((error: unknown) =>
        this.logger.warn(`could not release webhook claims: ${(error as Error).message}`),
      );
  }

  /** A webhook was created here: looks again after every commit that records events. */
  webhookCreated(): void {
    this.webhooksSeen = true;
    this.wake();
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

  /** This instance's claims now, the deliveries whose request it makes excluded from any other claim. */
  private terms(): ClaimTerms {
    return {
      me: this.instanceId,
      claimMs: this.config.timeoutMs + this.config.claimMarginMs,
      inFlight: [...this.current.values()].map((current) => current.id),
    };
  }

  /** Queues the deliveries of the events recorded since the last look, a batch per transaction. */
  private async fanOut(): Promise<void> {
    for (let batch = 0; batch < MAX_FAN_OUT_BATCHES; batch++) {
      const { webhooks, events } = await this.deliveries.fanOut(FAN_OUT_BATCH);
      this.webhooksSeen = webhooks;
      if (events < FAN_OUT_BATCH) return;
    }
  }

  /** Slots free now: requests in flight longer than `slowAfterMs` hold none, within the overall cap. */
  private freeSlots(): number {
    const now = performance.now();
    let holding = 0;
    for (const current of this.current.values())
      if (now - current.startedAt < this.config.slowAfterMs) holding++;
    return Math.min(
      this.config.concurrency - holding,
      this.config.concurrency * MAX_IN_FLIGHT_FACTOR - this.inFlight.size,
    );
  }

  /** Claims as many due heads of lines as there are free slots and starts a run on each. */
  private async fill(): Promise<void> {
    await this.fanOut();
    // Without a webhook no delivery can be sent (a claim joins its webhook).
    if (!this.webhooksSeen) return;
    const free = this.freeSlots();
    // A shutdown that began while this look was under way: no new request.
    if (free <= 0 || this.stopping) return;
    // A read first: a poll that finds nothing due writes nothing.
    if (!(await this.deliveries.anyDue(this.terms())) || this.stopping) return;
    const heads = await this.deliveries.claimHeads(this.terms(), free, this.config.concurrency);
    if (heads.length) this.claimedAny = true;
    for (const head of heads) {
      const key = head.id;
      // Counted at once: the next look sees this slot taken.
      this.current.set(key, { id: head.id, startedAt: performance.now() });
      const done = this.run(key, head)
        .catch((error: unknown) =>
          this.logger.error(
            `webhook delivery ${this.current.get(key)?.id ?? head.id}: ${(error as Error).message}`,
          ),
        )
        .finally(() => {
          this.inFlight.delete(key);
          this.current.delete(key);
          this.wake();
        });
      this.inFlight.set(key, done);
    }
  }

  /** Once the requests started now turn slow, their slots are free for other lines: look again then. */
  private lookWhenSlow(): void {
    if (this.slowTimer) return;
    this.slowTimer = setTimeout(() => {
      this.slowTimer = undefined;
      this.wake();
    }, this.config.slowAfterMs + 1);
    this.slowTimer.unref();
  }

  /**
   * One run of a line: sends `head` (with the deliveries that follow it, claimed now, when
   * its webhook takes batches); once that request is answered 2xx, its recording transaction
   * claims the line's next deliveries (up to RUN_LENGTH − 1 requests' worth), and they are
   * sent one request after another, each once the one before it was answered 2xx, while
   * their outcomes are recorded beside (group commit takes many at once). A failure, a
   * redelivery in the line or a shutdown ends the run; endRun then releases what was not
   * sent and the line goes back to the loop.
   */
  private async run(key: number, head: Attempt): Promise<void> {
    const line = lineOf(head);
    const version = this.lineVersions.get(line);
    const perRequest = head.batchSize;
    // A head being retried goes alone: an event its receiver refuses fails on its own, and
    // does not take the events before it in a batch down with it.
    const retried = head.attempts > 1;
    const first =
      perRequest > 1 && !retried && !this.stopping
        ? [head, ...(await this.deliveries.claimFollowing(head, this.terms(), perRequest - 1))]
        : [head];
    // The followers' attempt is counted when their outcome is recorded (the head's was when it was claimed).
    const headError = await sendWebhook(first, this.config.timeoutMs);
    if (headError !== null) {
      await this.failed(head, headError, false);
      if (first.length > 1)
        await this.deliveries.endRun(
          head,
          this.instanceId,
          first.slice(1).map((follower) => follower.id),
        );
      return;
    }
    const goOn = !this.stopping && RUN_LENGTH > 1;
    const { recorded, members } = await this.deliveries.delivered(
      first,
      this.terms(),
      goOn ? (RUN_LENGTH - 1) * perRequest : 0,
    );
    this.wasDelivered(first, recorded);
    if (!members.length) return;
    const records: Promise<void>[] = [];
    // Members from this index on were not sent (their claims are released at the end).
    let unsent = 0;
    let problem: unknown = null;
    try {
      while (unsent < members.length) {
        if (this.stopping || this.lineVersions.get(line) !== version) break;
        // Their attempt is counted when their outcome is recorded.
        const request = members
          .slice(unsent, unsent + perRequest)
          .map((member) => ({ ...member, attempts: member.attempts + 1 }));
        this.current.set(key, { id: request[0].id, startedAt: performance.now() });
        this.lookWhenSlow();
        const error = await sendWebhook(request, this.config.timeoutMs);
        if (error !== null) {
          // The first of the request failed (and is retried); those after it are sent again with it.
          unsent += 1;
          await Promise.all(records);
          await this.failed(request[0], error, true);
          break;
        }
        unsent += request.length;
        records.push(
          this.deliveries
            .membersDelivered(request, this.terms())
            .then((done) => this.wasDelivered(request, done)),
        );
      }
    } catch (error) {
      problem = error;
    }
    // Every outcome recorded (or failed) before the line goes on.
    const settled = await Promise.allSettled(records);
    problem ??= settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')?.reason;
    await this.deliveries.endRun(
      head,
      this.instanceId,
      members.slice(unsent).map((member) => member.id),
    );
    if (problem)
      throw problem instanceof Error ? problem : new Error('a webhook outcome was not recorded');
  }

  /** `recorded` of the deliveries of a request answered 2xx were recorded here (a claim may have been lost). */
  private wasDelivered(request: readonly Attempt[], recorded: number): void {
    if (recorded) this.outcomes.inc({ outcome: 'delivered' }, recorded);
    const [first] = request;
    this.logger.debug(
      request.length === 1
        ? `webhook delivery ${first.id} (${first.event.type}) delivered`
        : `webhook deliveries ${first.id}..${request[request.length - 1].id} (${request.length}) delivered`,
    );
  }

  /**
   * A delivery of the line of `webhookId` in `environment` was put back (redeliverWebhook):
   * a run of that line here sends nothing more, so the line waits for it again.
   */
  lineChanged(webhookId: string, environment: string): void {
    const line = `${webhookId}\u0000${environment}`;
    this.lineVersions.set(line, (this.lineVersions.get(line) ?? 0) + 1);
  }

  /** Records a failed attempt: a retry after a back-off, or FAILED (and the line goes on). */
  private async failed(attempt: Attempt, error: string, member: boolean): Promise<void> {
    const now = await this.deliveries.now();
    const givenUp =
      attempt.attempts >= this.config.maxAttempts ||
      now - attempt.retryFrom >= this.config.maxAgeMs;
    const next = givenUp ? null : now + backoffMs(this.config, attempt.attempts);
    const recorded = await this.deliveries.failed(attempt, this.instanceId, error, next, member);
    if (!recorded) return;
    this.outcomes.inc({ outcome: givenUp ? 'failed' : 'retry' });
    const host = hostOf(attempt.url);
    this.logger.warn(
      givenUp
        ? `webhook delivery ${attempt.id} to ${host} FAILED after ${attempt.attempts} attempts: ${error}`
        : `webhook delivery ${attempt.id} to ${host} attempt ${attempt.attempts} failed: ${error}; next in ${Math.round((next! - now) / 1000)} s`,
    );
  }
}
