import WebSocket from 'ws';
import type { TestApp } from './app.js';

export interface Frame {
  type: string;
  id?: string;
  payload?: any;
}

/** Every socket opened in this test file, so that `afterAll` can end them all. */
const opened: WebSocket[] = [];

/** A graphql-transport-ws socket spoken to frame by frame. */
export class RawSocket {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = JSON.parse((data as Buffer).toString('utf8')) as Frame;
      if (frame.type === 'ping') this.send({ type: 'pong' });
      this.frames.push(frame);
      this.wake();
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        this.wake();
      }),
    );
  }

  static open(app: TestApp): Promise<RawSocket> {
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    opened.push(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new RawSocket(ws)));
      ws.once('error', reject);
    });
  }

  /** Opens a socket and sends connection_init with `payload`. */
  static async init(app: TestApp, payload: unknown): Promise<RawSocket> {
    const socket = await RawSocket.open(app);
    socket.send({ type: 'connection_init', payload });
    return socket;
  }

  /** A socket the service acknowledged for `token`. */
  static async admitted(app: TestApp, token: string): Promise<RawSocket> {
    const socket = await RawSocket.init(app, { authorization: `Bearer ${token}` });
    const answer = await socket.next((f) => f.type === 'connection_ack');
    if (!answer) throw new Error(`socket not admitted: ${JSON.stringify(await socket.closed)}`);
    expect(answer).toEqual({ type: 'connection_ack' });
    return socket;
  }

  /** Ends every socket this test file opened. */
  static terminateAll(): void {
    for (const ws of opened.splice(0)) ws.terminate();
  }

  send(frame: Frame): void {
    this.ws.send(JSON.stringify(frame));
  }

  subscribe(id: string, query: string, variables: Record<string, unknown> = {}): void {
    this.send({ id, type: 'subscribe', payload: { query, variables } });
  }

  close(): void {
    this.ws.close();
  }

  terminate(): void {
    this.ws.terminate();
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** The first frame (already received or to come) matching `match`; null when the socket closes first. */
  async next(match: (frame: Frame) => boolean): Promise<Frame | null> {
    for (;;) {
      const found = this.frames.find(match);
      if (found) return found;
      if (this.ws.readyState === WebSocket.CLOSED) return null;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /**
   * Sends a ping and waits for its pong: every frame sent before it has been read. A
   * subscription may still be starting (its admission is asynchronous): to publish to it,
   * wait with `subscribed` instead.
   */
  async roundTrip(): Promise<void> {
    const from = this.frames.length;
    this.send({ type: 'ping' });
    await this.next((f) => f.type === 'pong' && this.frames.indexOf(f) >= from);
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}
