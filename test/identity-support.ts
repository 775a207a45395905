import WebSocket from 'ws';
import type { TestApp } from './support/app.js';

export interface Frame {
  type: string;
  id?: string;
  payload?: any;
}

/** A graphql-transport-ws socket spoken to frame by frame. */
export class Socket {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = JSON.parse((data as Buffer).toString('utf8')) as Frame;
      if (frame.type === 'ping') ws.send(JSON.stringify({ type: 'pong' }));
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

  /** A socket the service acknowledged for `token`. */
  static async admitted(app: TestApp, token: string): Promise<Socket> {
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    const socket = await new Promise<Socket>((resolve, reject) => {
      ws.once('open', () => resolve(new Socket(ws)));
      ws.once('error', reject);
    });
    socket.send({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
    const answer = await socket.next((f) => f.type === 'connection_ack');
    if (!answer) throw new Error(`socket not admitted: ${JSON.stringify(await socket.closed)}`);
    return socket;
  }

  send(frame: Frame): void {
    this.ws.send(JSON.stringify(frame));
  }

  subscribe(id: string, query: string, variables: Record<string, unknown> = {}): void {
    this.send({ id, type: 'subscribe', payload: { query, variables } });
  }

  terminate(): void {
    this.ws.terminate();
  }

  /** The first frame (received or to come) matching `match`; null when the socket closes first. */
  async next(match: (frame: Frame) => boolean): Promise<Frame | null> {
    for (;;) {
      const found = this.frames.find(match);
      if (found) return found;
      if (this.ws.readyState === WebSocket.CLOSED) return null;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Sends a ping and waits for its pong: every frame sent before it has been handled. */
  async roundTrip(): Promise<void> {
    const before = this.frames.filter((f) => f.type === 'pong').length;
    this.send({ type: 'ping' });
    let seen = 0;
    await this.next((f) => f.type === 'pong' && ++seen > before);
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}
