import { BusyError } from '../common/limit.errors.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';

/**
 * At most `slots` expensive requests execute at once (their answers are what fills the
 * heap); the others wait in arrival order, and one that waited `maxWaitMs` is refused with
 * RATE_LIMITED. Cheap requests never pass through here.
 */
export class HeavyQueryGate {
  private readonly turns: FifoSemaphore;

  constructor(
    slots: number,
    private readonly maxWaitMs: number,
  ) {
    this.turns = new FifoSemaphore(slots);
  }

  /** Resolves with the release function once a slot is this request's. */
  acquire(): Promise<() => void> {
    const turn = this.turns.take();
    const release = () => turn.end();
    if (turn.started) return Promise.resolve(release);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        turn.end();
        reject(
          new BusyError(
            Math.max(1, Math.ceil(this.maxWaitMs / 1000)),
            `${this.turns.width} expensive requests are running and this one waited ${this.maxWaitMs / 1000} s (PLANFENCE_MAX_HEAVY_QUERIES); retry later or ask for less`,
          ),
        );
      }, this.maxWaitMs);
      void turn.ready.then(() => {
        clearTimeout(timer);
        resolve(release);
      });
    });
  }
}
