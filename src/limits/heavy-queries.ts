import { BusyError } from '../common/limit.errors.js';

/**
 * At most `slots` expensive requests execute at once (their answers are what fills the
 * heap); the others wait in arrival order, and one that waited `maxWaitMs` is refused with
 * RATE_LIMITED. Cheap requests never pass through here.
 */
export class HeavyQueryGate {
  private running = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(
    private readonly slots: number,
    private readonly maxWaitMs: number,
  ) {}

  /** Resolves with the release function once a slot is this request's. */
  acquire(): Promise<() => void> {
    if (this.running < this.slots) {
      this.running++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(timer);
          resolve(this.releaser());
        },
      };
      const timer = setTimeout(() => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(
          new BusyError(
            Math.max(1, Math.ceil(this.maxWaitMs / 1000)),
            `${this.slots} expensive requests are running and this one waited ${this.maxWaitMs / 1000} s (PLANFENCE_MAX_HEAVY_QUERIES); retry later or ask for less`,
          ),
        );
      }, this.maxWaitMs);
      this.waiting.push(entry);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next in line; `running` stays the same.
      if (next) next.grant();
      else this.running--;
    };
  }
}
