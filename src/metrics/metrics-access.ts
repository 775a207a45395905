import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Who may read /metrics: with PLANFENCE_METRICS_TOKEN set, only a request whose
 * `Authorization` header is `Bearer <it>` (compared in constant time); unset, anyone who
 * can reach the address that serves it.
 */
export class MetricsAccess {
  private readonly expected: Buffer | null;

  constructor(token: string | undefined) {
    this.expected = token ? digest(`Bearer ${token}`) : null;
  }

  get open(): boolean {
    return this.expected === null;
  }

  allows(authorization: string | string[] | undefined): boolean {
    if (!this.expected) return true;
    return timingSafeEqual(digest(String(authorization ?? '')), this.expected);
  }
}

/** The 401 body, the same on the main port and on PLANFENCE_METRICS_LISTEN. */
export const METRICS_UNAUTHORIZED = {
  error: 'metrics need Authorization: Bearer <PLANFENCE_METRICS_TOKEN>',
  code: 'UNAUTHENTICATED',
};
