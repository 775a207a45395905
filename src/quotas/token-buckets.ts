/**
 * Token buckets by key, in this process's memory: each holds up to `capacity` tokens and
 * refills at `perSecond`. Times are this process's monotonic milliseconds.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    /** Named in refusals: which limit was reached, and the variable that sets it. */
    readonly limit: string,
    readonly capacity: number,
    readonly perSecond: number,
  ) {}

  private level(key: string, now: number): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return this.capacity;
    return Math.min(this.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
  }

  /** Seconds until `cost` tokens are available under `key` (0: now). A cost beyond the capacity counts as the capacity. */
  wait(key: string, cost: number, now: number): number {
    const missing = Math.min(cost, this.capacity) - this.level(key, now);
    return missing <= 0 ? 0 : missing / this.perSecond;
  }

  take(key: string, cost: number, now: number): void {
    this.buckets.set(key, {
      tokens: this.level(key, now) - Math.min(cost, this.capacity),
      at: now,
    });
  }

  /** Forgets every bucket that has refilled: a full bucket is the same as none. */
  prune(now: number): void {
    for (const key of this.buckets.keys()) {
      if (this.level(key, now) >= this.capacity) this.buckets.delete(key);
    }
  }

  get size(): number {
    return this.buckets.size;
  }
}
