/**
 * Work that arrives in bursts on the request thread, or in large pieces, taken one piece per
 * turn of the event loop. On SQLite every database call completes synchronously, so a burst
 * of subscriptions (1,000 subscribe frames read from one socket at once, 20 sockets × 100)
 * would otherwise run start to end inside one turn, each piece's promise chain resolving as
 * microtasks, and every HTTP request (`/health` included) would wait for the whole burst; so
 * would a 1 MiB plan's parse, hashing and write, one after the other. Each `turn()` resolves
 * in its own `setImmediate`, after the previous one's, so the event loop polls for I/O
 * between two pieces.
 */
export class LoopTurns {
  private last: Promise<void> = Promise.resolve();
  private waiting = 0;
  private given = 0;

  /** Resolves once every earlier turn has resolved and the event loop has polled once since. */
  turn(): Promise<void> {
    this.waiting++;
    const next = this.last.then(
      () =>
        new Promise<void>((resolve) =>
          setImmediate(() => {
            this.waiting--;
            this.given++;
            resolve();
          }),
        ),
    );
    this.last = next;
    return next;
  }

  /** Turns asked for and not yet taken (tests and metrics). */
  get pending(): number {
    return this.waiting;
  }

  /** Turns taken since the process started (tests: was a request answered between two?). */
  get taken(): number {
    return this.given;
  }
}

/**
 * The request thread's one queue of turns: subscription admissions, replay pages and the
 * steps of large plans share it.
 */
export const loopTurns = new LoopTurns();
