import { LARGE_BODY_BYTES } from '../limits/large-bodies.js';

/**
 * A submit whose content is larger than this is a large plan: its request holds several
 * copies of the content while it is decided (the parsed request, the Terraform parse and
 * summary, the idempotency fingerprint's canonical JSON, the stored row read back). Its body
 * is a large body, so while it arrives V8 collects garbage sooner (src/limits/large-bodies.ts).
 */
export const LARGE_PLAN_BYTES = LARGE_BODY_BYTES;

/**
 * Large plans decided at once by one service. The others wait their turn, in arrival order:
 * nothing is refused and nothing is dropped, a submit only waits longer. It bounds what ten
 * clients submitting 1 MiB plans together hold at once (their copies, and the garbage they
 * leave for the next collection) to what two hold; small plans never wait.
 */
export const LARGE_PLANS_AT_ONCE = 2;

/** A first-come first-served limit on how many jobs run at once. */
export class LargePlanGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly width: number = LARGE_PLANS_AT_ONCE) {}

  /** Jobs waiting for their turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Runs `job` when fewer than `width` jobs run; its turn passes on when it settles. */
  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running < this.width) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await job();
    } finally {
      // The turn goes straight to the next job: `running` counts it already.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
