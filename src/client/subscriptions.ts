/**
 * GraphQL subscriptions over one WebSocket (graphql-ws, subprotocol `graphql-transport-ws`,
 * docs/subscriptions.md): `await GraphQLSocket.open({ url, token })`, then `subscribe(...)`.
 * The socket is the WHATWG WebSocket of Node.js 22 and later, or the `ws` package where the
 * runtime has none (Node.js 20).
 */
import { errorFromBody, type GraphQLErrorBody, PlanfenceError, TransportError } from './errors.js';

/** What this module uses of a WebSocket: the WHATWG interface, which `ws` implements too. */
interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: 'open', listener: () => void): void;
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
  addEventListener(
    type: 'close',
    listener: (event: { code: number; reason: string }) => void,
  ): void;
  addEventListener(type: 'error', listener: (event: unknown) => void): void;
}
type SocketConstructor = new (url: string, protocols?: string | string[]) => SocketLike;

/** The runtime's WebSocket, else the `ws` package's; a TransportError names what is missing. */
async function webSocketImplementation(): Promise<SocketConstructor> {
  const native = (globalThis as { WebSocket?: SocketConstructor }).WebSocket;
  if (native) return native;
  try {
    const ws = await import('ws');
    return ws.WebSocket;
  } catch {
    throw new WebSocketUnavailableError();
  }
}

/** The runtime has no WebSocket and the `ws` package cannot be loaded: no retry mends that. */
export class WebSocketUnavailableError extends Error {
  constructor() {
    super(
      'subscriptions need a WebSocket: run Node.js 22 or later, or install the ws package beside planfence',
    );
    this.name = 'WebSocketUnavailableError';
  }
}

export interface SocketOptions {
  /** The service's base URL, e.g. http://127.0.0.1:4000 (the socket opens ws://…/graphql). */
  url: string;
  token: string;
  /** How long the socket may take to open and be acknowledged (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * How often the client sends a graphql-ws `ping` (default 15 s). A socket that has not
   * answered one within this long again is taken as lost: `closed` settles and the socket
   * is closed, so that a connection a network silently dropped is noticed.
   */
  pingEveryMs?: number;
}

export interface SubscriptionSink<T> {
  next(data: T): void;
  /** The service refused the subscription or ended it with errors (the first, as a PlanfenceError). */
  error(error: PlanfenceError): void;
  /** The service ended the subscription (e.g. its event feed restarted): subscribe again. */
  complete(): void;
}

/** Why the socket ended: its close code and reason (4403: the token was refused). */
export interface SocketClosed {
  code: number;
  reason: string;
}

type Message =
  | { type: 'connection_ack' | 'ping' | 'pong'; payload?: unknown }
  | { type: 'next'; id: string; payload: { data?: unknown; errors?: GraphQLErrorBody[] } }
  | { type: 'error'; id: string; payload: GraphQLErrorBody[] }
  | { type: 'complete'; id: string };

/** An admitted graphql-ws socket: subscriptions share it until it closes. */
export class GraphQLSocket {
  private readonly sinks = new Map<string, SubscriptionSink<unknown>>();
  private nextId = 1;
  private lastHeard = performance.now();
  private pinger: NodeJS.Timeout | null = null;
  private settleClosed!: (closed: SocketClosed) => void;
  /** Settles once, when the socket closed or was taken as lost. */
  readonly closed: Promise<SocketClosed>;

  private constructor(private readonly socket: SocketLike) {
    this.closed = new Promise((resolve) => (this.settleClosed = resolve));
  }

  /**
   * Opens the socket and sends `connection_init` with the token; resolves once the service
   * acknowledged it. A socket the service closes first is an UnauthenticatedError where its
   * reason starts with UNAUTHENTICATED (close code 4403), else a TransportError.
   */
  static async open(options: SocketOptions): Promise<GraphQLSocket> {
    const WebSocketImpl = await webSocketImplementation();
    const url = `${options.url.replace(/\/+$/, '').replace(/^http/, 'ws')}/graphql`;
    const socket = new WebSocketImpl(url, 'graphql-transport-ws');
    const client = new GraphQLSocket(socket);
    const pingEveryMs = options.pingEveryMs ?? 15_000;
    await new Promise<void>((resolve, reject) => {
      let acknowledged = false;
      const timer = setTimeout(() => {
        reject(
          new TransportError(
            `no connection_ack from ${url} within ${options.connectTimeoutMs ?? 10_000} ms`,
          ),
        );
        client.lost(4408, 'no connection_ack');
      }, options.connectTimeoutMs ?? 10_000);
      socket.addEventListener('open', () =>
        socket.send(
          JSON.stringify({
            type: 'connection_init',
            payload: { authorization: `Bearer ${options.token}` },
          }),
        ),
      );
      socket.addEventListener('error', () => undefined); // the close event follows and decides
      socket.addEventListener('close', (event) => {
        clearTimeout(timer);
        client.ended(event.code, event.reason);
        if (acknowledged) return;
        reject(
          event.reason.startsWith('UNAUTHENTICATED')
            ? errorFromBody({ message: event.reason, extensions: { code: 'UNAUTHENTICATED' } })
            : new TransportError(
                `cannot open ${url}: closed ${event.code}${event.reason ? ` (${event.reason})` : ''}`,
              ),
        );
      });
      socket.addEventListener('message', (event) => {
        client.lastHeard = performance.now();
        const message = client.parse(event.data);
        if (!message) return;
        if (message.type === 'connection_ack' && !acknowledged) {
          acknowledged = true;
          clearTimeout(timer);
          client.keepAlive(pingEveryMs);
          resolve();
          return;
        }
        client.receive(message);
      });
    });
    return client;
  }

  /**
   * Starts one subscription; returns the function that ends it (sends `complete`). The sink
   * hears nothing more once the socket closes: watch `closed` and subscribe again on a new socket.
   */
  subscribe<T>(
    query: string,
    variables: Record<string, unknown>,
    sink: SubscriptionSink<T>,
  ): () => void {
    const id = String(this.nextId++);
    this.sinks.set(id, sink);
    this.send({ id, type: 'subscribe', payload: { query, variables } });
    return () => {
      if (this.sinks.delete(id)) this.send({ id, type: 'complete' });
    };
  }

  /** Closes the socket (normal closure); `closed` settles. */
  close(): void {
    this.lost(1000, 'closed by the client');
  }

  private send(message: Record<string, unknown>): void {
    if (this.socket.readyState === 1) this.socket.send(JSON.stringify(message));
  }

  private parse(data: unknown): Message | null {
    try {
      return JSON.parse(typeof data === 'string' ? data : String(data)) as Message;
    } catch {
      return null;
    }
  }

  private receive(message: Message): void {
    switch (message.type) {
      case 'ping':
        this.send({ type: 'pong' });
        return;
      case 'next': {
        const sink = this.sinks.get(message.id);
        if (message.payload.errors?.length) sink?.error(errorFromBody(message.payload.errors[0]));
        else sink?.next(message.payload.data);
        return;
      }
      case 'error': {
        const sink = this.sinks.get(message.id);
        this.sinks.delete(message.id);
        sink?.error(
          errorFromBody(message.payload[0] ?? { message: 'subscription refused', extensions: {} }),
        );
        return;
      }
      case 'complete': {
        const sink = this.sinks.get(message.id);
        this.sinks.delete(message.id);
        sink?.complete();
        return;
      }
      default:
        return;
    }
  }

  /** Pings every `everyMs`; a socket silent for two intervals is taken as lost. */
  private keepAlive(everyMs: number): void {
    this.pinger = setInterval(() => {
      if (performance.now() - this.lastHeard > 2 * everyMs) {
        this.lost(4000, `nothing heard for ${Math.round((2 * everyMs) / 1000)} s`);
        return;
      }
      this.send({ type: 'ping' });
    }, everyMs);
    this.pinger.unref?.();
  }

  /** Ends the socket from this side: `closed` settles now, whatever the close handshake does. */
  private lost(code: number, reason: string): void {
    this.ended(code, reason);
    try {
      this.socket.close(1000, reason.slice(0, 120));
    } catch {
      // already closing
    }
  }

  private ended(code: number, reason: string): void {
    if (this.pinger) clearInterval(this.pinger);
    this.pinger = null;
    this.sinks.clear();
    this.settleClosed({ code, reason });
  }
}
