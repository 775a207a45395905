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

/** What one GraphQL request (its context object) has been charged and refused so far. */
export interface RequestState {
  /** The request's one charge to the requests bucket was made (or refused). */
  charged: boolean;
  /** Once set, every later field of the request is refused with it. */
  refused: Error | null;
  /** A refusal of this request was written to the audit log. */
  audited: boolean;
}

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
  readonly auditedRefusals: TokenBuckets;
  private readonly states = new WeakMap<object, RequestState>();
  /**
   * The limits' clock: this process's monotonic milliseconds. Tests replace it to hold time
   * still, so that what a burst may do does not depend on how fast the machine answers it.
   */
  monotonic: () => number = () => performance.now();
  private prunedAt = this.monotonic();

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
    this.auditedRefusals = new TokenBuckets(
      `at most ${q.auditRefusalsPerMinute} audited refusals per minute per principal (PLANFENCE_AUDIT_REFUSALS_PER_MINUTE)`,
      q.auditRefusalsPerMinute,
      q.auditRefusalsPerMinute / 60,
    );
  }

  /** The charges and refusal of the GraphQL request whose context is `ctx`. */
  requestState(ctx: object): RequestState {
    let state = this.states.get(ctx);
    if (!state) this.states.set(ctx, (state = { charged: false, refused: null, audited: false }));
    return state;
  }

  /**
   * A call of `principal` that is being refused (FORBIDDEN) still counts as its request:
   * charged once per request like an accepted one. RATE_LIMITED (thrown) when the
   * principal's requests are used up, so a flood of refused calls ends like any other.
   */
  chargeRefusal(ctx: object, principal: string): void {
    const state = this.requestState(ctx);
    if (state.refused) throw state.refused;
    if (state.charged) return;
    state.charged = true;
    try {
      this.admit([{ buckets: this.requests, key: principal, cost: 1 }]);
    } catch (error) {
      state.refused = error as Error;
      throw error;
    }
  }

  /**
   * Whether a refusal of this request may be written to the audit log: at most one per
   * request, and PLANFENCE_AUDIT_REFUSALS_PER_MINUTE per principal.
   */
  mayAuditRefusal(ctx: object, principal: string, now = this.monotonic()): boolean {
    const state = this.requestState(ctx);
    if (state.audited) return false;
    state.audited = true;
    if (this.auditedRefusals.wait(principal, 1, now) > 0) return false;
    this.auditedRefusals.take(principal, 1, now);
    return true;
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
  admit(charges: Charge[], now = this.monotonic()): void {
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
      for (const buckets of [
        this.requests,
        this.writes,
        this.leases,
        this.planBytes,
        this.auditedRefusals,
      ])
        buckets.prune(now);
    }
  }
}
