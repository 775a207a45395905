/** A place in the line of a FifoSemaphore. */
export interface Turn {
  /** Resolves when the turn comes (at once when one is free and nobody waits before it). */
  readonly ready: Promise<void>;
  /** Whether the turn has come. */
  readonly started: boolean;
  /** Starts the turn now even if every turn is held (for a holder that waited long enough). */
  readonly startNow: () => void;
  /** Ends the turn, which passes to the first in line; before it came, leaves the line. Once. */
  readonly end: () => void;
}

/**
 * A first-come first-served limit on how many holders have a turn at once: the others wait
 * in arrival order, and an ended turn passes straight to the first of them.
 */
export class FifoSemaphore {
  private holders = 0;
  /** The waiting turns' starts, in arrival order (a Set keeps insertion order). */
  private readonly line = new Set<() => void>();

  constructor(readonly width: number) {}

  /** FifoSemaphore waiting in line. */
  get queued(): number {
    return this.line.size;
  }

  /** FifoSemaphore held now. */
  get held(): number {
    return this.holders;
  }

  /** Takes a place in line. */
  take(): Turn {
    let state: 'waiting' | 'started' | 'ended' = 'waiting';
    let resolve!: () => void;
    const ready = new Promise<void>((r) => (resolve = r));
    const start = () => {
      if (state !== 'waiting') return;
      state = 'started';
      this.line.delete(start);
      this.holders++;
      resolve();
    };
    const turn: Turn = {
      ready,
      get started() {
        return state === 'started';
      },
      startNow: start,
      end: () => {
        if (state === 'started') {
          this.holders--;
          this.passOn();
        } else this.line.delete(start);
        state = 'ended';
      },
    };
    if (this.holders < this.width && this.line.size === 0) start();
    else this.line.add(start);
    return turn;
  }

  /** Runs `job` in its turn; the turn passes on when the job settles. */
  async run<T>(job: () => Promise<T>): Promise<T> {
    const turn = this.take();
    await turn.ready;
    try {
      return await job();
    } finally {
      turn.end();
    }
  }

  private passOn(): void {
    for (const start of this.line) {
      if (this.holders >= this.width) return;
      start();
    }
  }
}

/**
 * A FifoSemaphore for each key, each `width` wide: made when a key is first taken, dropped when its
 * last turn ends (so keys that come and go leave nothing behind).
 */
export class FifoSemaphoresByKey {
  private readonly lines = new Map<string, FifoSemaphore>();

  constructor(readonly width: number) {}

  /** Holders waiting in line, all keys together. */
  get queued(): number {
    let queued = 0;
    for (const turns of this.lines.values()) queued += turns.queued;
    return queued;
  }

  /** Runs `job` in a turn of `key`'s line; the turn passes on when the job settles. */
  async run<T>(key: string, job: () => Promise<T>): Promise<T> {
    let turns = this.lines.get(key);
    if (!turns) this.lines.set(key, (turns = new FifoSemaphore(this.width)));
    try {
      return await turns.run(job);
    } finally {
      if (turns.held === 0 && turns.queued === 0) this.lines.delete(key);
    }
  }
}
