import { QuotaError } from '../quotas/quota.errors.js';
import { TokenBuckets } from '../quotas/token-buckets.js';

/**
 * What subscriptions resumed with `after` may replay, per principal, on this instance: a
 * token bucket of replayed events (PLANFENCE_WS_REPLAY_EVENTS_PER_MINUTE), a token bucket of
 * replayed bytes (the large fields the events carry, plan content above all: as many a
 * minute as one response may hold, PLANFENCE_MAX_RESPONSE_BYTES) and a cap of replays in
 * progress at once (PLANFENCE_WS_MAX_REPLAYS_PER_PRINCIPAL). A replay over any of them is
 * RATE_LIMITED {retryAfterSeconds} before anything is read. A replay larger than a whole
 * bucket needs the bucket full, so one such replay runs at a time per principal.
 */
export class ReplayBudget {
  private readonly events: TokenBuckets;
  private readonly bytes: TokenBuckets;
  private readonly running = new Map<string, number>();

  constructor(
    eventsPerMinute: number,
    private readonly maxRunning: number,
    bytesPerMinute = Number.MAX_SAFE_INTEGER,
  ) {
    this.events = new TokenBuckets(
      `at most ${eventsPerMinute} replayed events per minute per principal (PLANFENCE_WS_REPLAY_EVENTS_PER_MINUTE)`,
      eventsPerMinute,
      eventsPerMinute / 60,
    );
    this.bytes = new TokenBuckets(
      `at most ${bytesPerMinute} replayed bytes per minute per principal (PLANFENCE_MAX_RESPONSE_BYTES)`,
      bytesPerMinute,
      bytesPerMinute / 60,
    );
  }

  /**
   * Charges a replay of `events` events carrying `bytes` bytes to `principal`; the returned
   * function ends the replay (idempotent). RATE_LIMITED when the principal has `maxRunning`
   * replays in progress or not enough events or bytes left in its buckets; nothing is
   * charged then.
   */
  admit(principal: string, events: number, bytes = 0, now = performance.now()): () => void {
    const running = this.running.get(principal) ?? 0;
    if (running >= this.maxRunning) {
      throw QuotaError.rateLimited(
        `at most ${this.maxRunning} replays in progress per principal (PLANFENCE_WS_MAX_REPLAYS_PER_PRINCIPAL)`,
        1,
      );
    }
    const wait = this.events.wait(principal, events, now);
    if (wait > 0) throw QuotaError.rateLimited(this.events.limit, Math.max(1, Math.ceil(wait)));
    const waitBytes = this.bytes.wait(principal, bytes, now);
    if (waitBytes > 0) {
      throw QuotaError.rateLimited(this.bytes.limit, Math.max(1, Math.ceil(waitBytes)));
    }
    this.events.take(principal, events, now);
    if (bytes > 0) this.bytes.take(principal, bytes, now);
    if (this.events.size > 10_000) this.events.prune(now);
    if (this.bytes.size > 10_000) this.bytes.prune(now);
    this.running.set(principal, running + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = (this.running.get(principal) ?? 1) - 1;
      if (left > 0) this.running.set(principal, left);
      else this.running.delete(principal);
    };
  }
}
