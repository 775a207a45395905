/**
 * A TCP proxy between the service and PostgreSQL that holds every chunk for a fixed delay
 * in each direction: a network between them, as when the database runs on another host of
 * the zone (0.5 ms each way by default). It also counts round trips: on each connection, a
 * turn is a chunk from the service that follows a chunk from the database (or opens the
 * connection); a statement the service sends and waits for costs one, statements it
 * pipelines cost one together. A database chunk counts from when the service is given it,
 * not from when the proxy received it: a service chunk sent before then cannot have waited
 * for it, however slowly a loaded machine passes either on. The turns of a connection's
 * start-up (authentication) are counted apart (`startupTurns`): a pool opens its
 * connections once, not per statement.
 *
 * Node's timers are whole milliseconds, so a chunk is held by a timer only for the whole
 * milliseconds of its wait and then by turns of the event loop until its time has come
 * (setImmediate): a delay under 1 ms is kept to within a few microseconds while the bench
 * process is not busy elsewhere. The delay each chunk was really held is measured and
 * reported (`heldMs`).
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

export class LatencyProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  /**
   * Round trips (turns) seen since the start or the last `reset`, on connections that have
   * finished their start-up (PostgreSQL's first ReadyForQuery): what statements cost.
   */
  turns = 0;
  /** The turns of opening connections (start-up and authentication), counted apart. */
  startupTurns = 0;
  /** How long chunks were really held, ms (a sample: the last 10,000). */
  private readonly held: number[] = [];
  /** Chunks being held, in arrival order: one delay for all, so the first is due first. */
  private readonly holding: {
    due: number;
    received: number;
    to: Socket;
    chunk: Buffer;
    /** Called once the chunk is written on. */
    passed: () => void;
  }[] = [];
  private releasing = false;

  constructor(
    private readonly target: { host: string; port: number },
    /**
     * Held each way; 0 forwards at once (once what is held has gone: a chunk never
     * overtakes one sent before it). May be changed while the proxy runs.
     */
    public delayMs: number,
    /**
     * Sees each chunk the service sends, with the turn it belongs to and its connection's
     * own turn (connections are numbered from 1 as they open).
     */
    private readonly onServiceChunk?: (
      chunk: Buffer,
      turn: number,
      connection: { id: number; turn: number },
    ) => void,
  ) {}

  /** Listens on a loopback port; returns it. */
  async start(): Promise<number> {
    this.server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(0, '127.0.0.1', () => resolve());
    });
    return (this.server.address() as { port: number }).port;
  }

  reset(): void {
    this.turns = 0;
    this.startupTurns = 0;
  }

  /** The median time a chunk was held, ms. */
  heldMs(): number | null {
    if (!this.held.length) return null;
    const sorted = [...this.held].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => (this.server ? this.server.close(resolve) : resolve(null)));
  }

  /** Forwards every chunk whose time has come; comes back for the next one. */
  private release(): void {
    const now = performance.now();
    while (this.holding.length && this.holding[0].due <= now) {
      const { received, to, chunk, passed } = this.holding.shift()!;
      if (this.held.length >= 10_000) this.held.shift();
      this.held.push(now - received);
      if (!to.destroyed) to.write(chunk);
      passed();
    }
    if (!this.holding.length) {
      this.releasing = false;
      return;
    }
    const wait = this.holding[0].due - now;
    if (wait >= 2) setTimeout(() => this.release(), Math.floor(wait) - 1);
    else setImmediate(() => this.release());
  }

  private connections = 0;

  private pipe(client: Socket): void {
    const upstream = connect(this.target.port, this.target.host);
    const connection = { id: ++this.connections, turn: 0 };
    // The database's bytes are read until its first ReadyForQuery ('Z'): the start-up's end.
    let ready = false;
    let pending = Buffer.alloc(0);
    const seeStartup = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (!ready && pending.length >= 5) {
        const length = pending.readInt32BE(1);
        if (pending.length < 1 + length) return;
        if (pending[0] === 0x5a) ready = true;
        pending = pending.subarray(1 + length);
      }
      if (ready) pending = Buffer.alloc(0);
    };
    this.sockets.add(client).add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    let last: 'service' | 'database' = 'database';
    const forward = (from: Socket, to: Socket, side: 'service' | 'database') => {
      from.on('data', (chunk: Buffer) => {
        if (side === 'database' && !ready) seeStartup(chunk);
        if (side === 'service') {
          if (last === 'database') {
            if (ready) this.turns++;
            else this.startupTurns++;
            connection.turn++;
          }
          last = 'service';
          this.onServiceChunk?.(chunk, this.turns, connection);
        }
        // The service has the database's answer once it is written on to it.
        const passed = side === 'database' ? () => (last = 'database') : () => undefined;
        if (this.delayMs <= 0 && !this.holding.length) {
          if (!to.destroyed) to.write(chunk);
          passed();
          return;
        }
        const received = performance.now();
        this.holding.push({
          due: received + Math.max(0, this.delayMs),
          received,
          to,
          chunk,
          passed,
        });
        if (!this.releasing) {
          this.releasing = true;
          setImmediate(() => this.release());
        }
      });
      from.on('close', () => setTimeout(() => to.destroy(), this.delayMs));
      from.on('error', () => to.destroy());
    };
    forward(client, upstream, 'service');
    forward(upstream, client, 'database');
    const forget = () => {
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', forget);
  }
}

/**
 * The SQL texts of the PostgreSQL frontend messages in `chunk` that carry one (Query,
 * Parse), in order; a message cut at the chunk's end is left out.
 */
export function frontendStatements(chunk: Buffer): string[] {
  const found: string[] = [];
  for (let i = 0; i + 5 <= chunk.length;) {
    const type = String.fromCharCode(chunk[i]);
    const length = chunk.readInt32BE(i + 1);
    if (i + 1 + length > chunk.length) break;
    const body = chunk.subarray(i + 5, i + 1 + length);
    if (type === 'Q') found.push(body.subarray(0, body.indexOf(0)).toString());
    if (type === 'P') {
      const nameEnd = body.indexOf(0);
      found.push(body.subarray(nameEnd + 1, body.indexOf(0, nameEnd + 1)).toString());
    }
    i += 1 + length;
  }
  return found;
}
