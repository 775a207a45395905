import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as a webhook receiver saw it. */
export interface Received {
  delivery: string;
  event: string;
  signature: string;
  body: string;
  json: any;
  at: number;
  /** Its place among every request any Receiver of this process has received, from 1. */
  order: number;
}

/** Requests received by every Receiver of this process so far. */
let arrivals = 0;

/** How many requests every Receiver of this process has received so far (the next's `order` is one more). */
export function arrivalsSoFar(): number {
  return arrivals;
}

/**
 * A real HTTP receiver on a random loopback port. `answer` decides each response (status;
 * `null` destroys the connection without one); `holdMs` keeps every request open that long
 * before answering, so that a crash can fall in the middle of one.
 */
export class Receiver {
  readonly received: Received[] = [];
  /** Requests answered so far. */
  count = 0;
  /** Deliveries those requests carried (a batch lists several in `Planfence-Delivery`). */
  deliveries = 0;
  /** false: only count requests (a benchmark's receiver), keep nothing of them. */
  keep = true;
  answer: (request: Received) => number | null = () => 200;
  holdMs = 0;
  private server: Server | null = null;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async start(): Promise<void> {
    const server = createServer((request, response) => {
      void readBody(request).then(async (body) => {
        this.count++;
        const order = ++arrivals;
        this.deliveries += String(request.headers['planfence-delivery'] ?? '').split(',').length;
        if (!this.keep) return void response.writeHead(204).end();
        const entry: Received = {
          delivery: String(request.headers['planfence-delivery'] ?? ''),
          event: String(request.headers['planfence-event'] ?? ''),
          signature: String(request.headers['planfence-signature'] ?? ''),
          body,
          json: safeJson(body),
          at: Date.now(),
          order,
        };
        this.received.push(entry);
        if (this.holdMs) await new Promise((resolve) => setTimeout(resolve, this.holdMs));
        const status = this.answer(entry);
        if (status === null) return void request.socket.destroy();
        response.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Closes the port (connection refused) until `start()` listens on the same port again. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  /** Waits until `done()` holds, polling; fails with `what` after `timeoutMs`. */
  static async until(done: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function safeJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
