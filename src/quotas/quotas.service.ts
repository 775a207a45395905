import { Inject, Injectable } from '@nestjs/common';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { QuotaError } from './quota.errors.js';
import { TokenBuckets } from './token-buckets.js';

/** What one GraphQL root field costs against the limits. */
export interface Charge {
  buckets: TokenBuckets;
  key: string;
  cost: number;
}

const PRUNE_EVERY_MS = 10_000;

/**
 * Per-principal rate limits and per-environment quotas (RATE_LIMITED {retryAfterSeconds}).
 * Each instance counts on its own, in memory: with N instances behind a balancer a
 * principal can reach up to N times each limit. Time is this process's monotonic clock
 * (the limits decide no protected state, R11).
 */
@Injectable()
export class QuotasService {
  readonly requests: TokenBuckets;
  readonly writes: TokenBuckets;
  readonly leases: TokenBuckets;
  readonly planBytes: TokenBuckets;
  private prunedAt = performance.now();

  constructor(@Inject(CONFIG) config: Config) {
    const q = config.quotas;
    this.requests = new TokenBuckets(
      `at most ${q.requestsPerSecond} requests per second per principal (PLANFENCE_RATE_REQUESTS_PER_SECOND, burst PLANFENCE_RATE_REQUESTS_BURST)`,
      q.requestBurst,
      q.requestsPerSecond,
    );
    this.writes = new TokenBuckets(
      `at most ${q.writesPerSecond} mutation fields per second per principal (PLANFENCE_RATE_WRITES_PER_SECOND, burst PLANFENCE_RATE_WRITES_BURST)`,
      q.writeBurst,
      q.writesPerSecond,
    );
    this.leases = new TokenBuckets(
      `at most ${q.leasesPerMinute} acquireLease calls per minute per principal (PLANFENCE_RATE_LEASES_PER_MINUTE)`,
      q.leasesPerMinute,
      q.leasesPerMinute / 60,
    );
    this.planBytes = new TokenBuckets(
      `at most ${q.planBytesPerHour} bytes of plan content per hour per environment (PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR)`,
      q.planBytesPerHour,
      q.planBytesPerHour / 3600,
    );
  }

  /**
   * What one root field costs (every door charges the same): the first field of a request
   * also pays for the request; every mutation field is a write; every acquireLease is a
   * lease; a submitPlan's content is charged to its environment's hourly bytes, whether or
   * not it is then accepted.
   */
  chargesFor(
    principal: string,
    field: { root: string; name: string; input?: { environment?: unknown; content?: unknown } },
    firstOfRequest: boolean,
  ): Charge[] {
    const charges: Charge[] = [];
    if (firstOfRequest) charges.push({ buckets: this.requests, key: principal, cost: 1 });
    if (field.root !== 'Mutation') return charges;
    charges.push({ buckets: this.writes, key: principal, cost: 1 });
    if (field.name === 'acquireLease')
      charges.push({ buckets: this.leases, key: principal, cost: 1 });
    const input = field.input;
    if (
      field.name === 'submitPlan' &&
      typeof input?.environment === 'string' &&
      typeof input.content === 'string'
    ) {
      charges.push({
        buckets: this.planBytes,
        key: input.environment,
        cost: Buffer.byteLength(input.content, 'utf8'),
      });
    }
    return charges;
  }

  /**
   * Takes every charge, or none: when one does not fit, nothing is taken and the call is
   * RATE_LIMITED with the wait after which all of them fit (whole seconds, at least 1).
   */
  admit(charges: Charge[], now = performance.now()): void {
    let wait = 0;
    let limit = '';
    for (const { buckets, key, cost } of charges) {
      const needed = buckets.wait(key, cost, now);
      if (needed > wait) {
        wait = needed;
        limit = buckets.limit;
      }
    }
    if (wait > 0) throw QuotaError.rateLimited(limit, Math.max(1, Math.ceil(wait)));
    for (const { buckets, key, cost } of charges) buckets.take(key, cost, now);
    if (now - this.prunedAt >= PRUNE_EVERY_MS) {
      this.prunedAt = now;
      for (const buckets of [this.requests, this.writes, this.leases, this.planBytes])
        buckets.prune(now);
    }
  }
}
