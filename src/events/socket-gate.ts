import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  Kind,
  type SelectionSetNode,
  validate,
} from 'graphql';
import type { WebSocket, WebSocketServer } from 'ws';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../model/principal.entity.js';
import { CONFIG } from '../config/config.module.js';
import type { Config, SocketLimits } from '../config/config.js';
import { loopTurns } from '../common/loop-turns.js';
import { PgListener } from '../database/pg-listener.js';
import { PrincipalChanges } from '../auth/principal-changes.js';
import { CloseCode, SocketError } from './socket.errors.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';

/** What a subscription's resolvers and the AuthGuard see of the socket's caller. */
export interface SocketRequest {
  headers: { authorization: string };
  principal: Principal;
}

/** One WebSocket, from its upgrade to its close. */
export class SocketSession {
  /** Settles once `connection_init` was answered: the caller, or null when refused. */
  admission: Promise<SocketRequest | null> | null = null;
  request: SocketRequest | null = null;
  /** Ids of this socket's subscriptions that were admitted and have not ended. */
  readonly active = new Set<string>();
  /** Ids admitted by the parsing hook whose execution hook has not run yet, with their query text. */
  readonly starting = new Map<string, string>();
  /** Ids the client ended while they were starting: they must not start. */
  readonly endedEarly = new Set<string>();
  initTimer: NodeJS.Timeout | null = null;
  expiryTimer: NodeJS.Timeout | null = null;
  /** Subscriptions refused on this socket so far. */
  refusals = 0;
  /** One subscription admitted at a time, in arrival order (SocketGate.admitSubscription). */
  readonly admissions = new FifoSemaphore(1);

  constructor(readonly socket: WebSocket) {}

  /** The client ended subscription `id` (`complete`/`stop`). */
  ended(id: string): void {
    this.active.delete(id);
    if (this.starting.delete(id)) this.endedEarly.add(id);
  }

  get open(): boolean {
    return this.socket.readyState === this.socket.OPEN;
  }

  /** Closes the socket with a graphql-ws close code; its subscriptions end with it. */
  close(code: number, reason: string): void {
    if (
      this.socket.readyState !== this.socket.OPEN &&
      this.socket.readyState !== this.socket.CONNECTING
    )
      return;
    this.socket.close(code, truncateReason(reason));
    // A socket paused for its backlog (oneMessagePerTurn) would not read the client's close
    // frame, and would linger until ws's close timeout (30 s): read on, the messages that
    // follow are dropped.
    if (this.socket.isPaused) this.socket.resume();
  }
}

const sessions = new WeakMap<WebSocket, SocketSession>();

/** The session of a socket the gate watches (undefined for any other). */
export function sessionOf(socket: WebSocket): SocketSession | undefined {
  return sessions.get(socket);
}

/** A WebSocket close reason is at most 123 bytes of UTF-8. */
function truncateReason(reason: string): string {
  let out = reason;
  while (Buffer.byteLength(out) > 123) out = out.slice(0, -1);
  return out;
}

interface MercuriusHooks {
  addHook(
    name: 'preSubscriptionParsing',
    hook: (
      schema: GraphQLSchema,
      source: string,
      context: SubscriptionContext,
      id: string,
    ) => Promise<void>,
  ): void;
  addHook(
    name: 'preSubscriptionExecution',
    hook: (
      schema: GraphQLSchema,
      document: DocumentNode,
      context: SubscriptionContext,
      id: string,
    ) => Promise<void>,
  ): void;
}

interface GuardedServer {
  graphql?: MercuriusHooks;
  addHook(
    name: 'onRequest',
    hook: (
      request: { headers: Record<string, unknown>; server: { websocketServer?: WebSocketServer } },
      reply: unknown,
      done: () => void,
    ) => void,
  ): void;
}

/** The per-subscription context Mercurius hands to its hooks (what `subscriptionOptions().context` returned, merged). */
export interface SubscriptionContext {
  req?: SocketRequest;
  planfenceSocket?: SocketSession;
}

/**
 * Admission and limits of GraphQL subscriptions over WebSockets (docs/security.md):
 *
 * - a socket must send `connection_init` with `payload.authorization: "Bearer <token>"`
 *   naming a valid token within `initTimeoutMs`, else it is closed (4408); a bad token
 *   closes it at once (4403, reason `UNAUTHENTICATED: ...`) and nothing is acknowledged;
 * - a principal holds at most `maxSocketsPerPrincipal` open sockets (one more: 4429,
 *   reason `RATE_LIMITED: ...`), a socket at most `maxSubscriptionsPerSocket`
 *   subscriptions (one more is refused with RATE_LIMITED; the socket stays);
 * - a subscription selects exactly one root field, at most `maxSubscriptionFields` fields
 *   with fragments expanded, and passes GraphQL validation (else BAD_USER_INPUT);
 * - when a principal's access changes (PrincipalChanges), each of its sockets is checked
 *   again at once and closed (4403) when its token no longer authenticates, which ends
 *   every subscription on it; every socket is also checked every `recheckIntervalMs` and
 *   when a lost LISTEN connection is back (PgListener), and every new subscription checks
 *   the token before it starts.
 */
@Injectable()
export class SocketGate implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(SocketGate.name);
  private readonly limits: SocketLimits;
  /** Admitted open sockets by principal name. */
  private readonly byPrincipal = new Map<string, Set<SocketSession>>();
  private recheckTimer: NodeJS.Timeout | null = null;
  private readonly watched = new WeakSet<WebSocketServer>();
  private stopListening: (() => void) | null = null;
  private stopRecovery: (() => void) | null = null;
  /**
   * What the shape limits and GraphQL validation said of a subscription's query text (null:
   * nothing), for the last CHECKED_DOCUMENTS texts: 100 subscriptions of one query on each
   * of 20 sockets are validated once, not 2,000 times.
   */
  private readonly checked = new Map<string, string | null>();

  constructor(
    private readonly auth: AuthService,
    private readonly changes: PrincipalChanges,
    private readonly listener: PgListener,
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) config: Config,
  ) {
    this.limits = config.sockets;
  }

  onApplicationBootstrap(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance<GuardedServer>();
    if (!fastify?.graphql) throw new Error('subscriptions: no GraphQL server to guard');
    fastify.graphql.addHook('preSubscriptionParsing', (_schema, source, context, id) =>
      this.admitSubscription(context, id, source),
    );
    fastify.graphql.addHook('preSubscriptionExecution', (schema, document, context, id) =>
      this.checkDocument(schema, document, context, id),
    );
    // Mercurius' WebSocket server lives in the encapsulated context of its route; an upgrade
    // request names it before the socket exists, so its `connection` listener is in place
    // before the first socket opens, and runs before Mercurius sees that socket.
    fastify.addHook('onRequest', (request, _reply, done) => {
      if (request.headers.upgrade) this.watch(request.server.websocketServer);
      done();
    });
    this.stopListening = this.changes.onChange((name) => void this.recheck(name));
    // Revocations committed while the LISTEN connection was lost were not heard.
    this.stopRecovery = this.listener.onRecovery(() => void this.recheckAll());
    this.recheckTimer = setInterval(() => void this.recheckAll(), this.limits.recheckIntervalMs);
    this.recheckTimer.unref();
  }

  private watch(server: WebSocketServer | undefined): void {
    if (!server || this.watched.has(server)) return;
    this.watched.add(server);
    server.on('connection', (socket: WebSocket) => this.opened(socket));
  }

  onApplicationShutdown(): void {
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    this.stopListening?.();
    this.stopRecovery?.();
  }

  /** Open admitted sockets of `name` (tests and metrics). */
  socketsOf(name: string): number {
    return this.byPrincipal.get(name)?.size ?? 0;
  }

  private opened(socket: WebSocket): void {
    const session = new SocketSession(socket);
    sessions.set(socket, session);
    session.initTimer = setTimeout(
      () =>
        session.close(
          CloseCode.ConnectionInitialisationTimeout,
          `UNAUTHENTICATED: no connection_init with a valid token within ${this.limits.initTimeoutMs / 1000} s`,
        ),
      this.limits.initTimeoutMs,
    );
    socket.on('message', (data: Buffer, isBinary: boolean) =>
      this.received(session, data, isBinary),
    );
    this.oneMessagePerTurn(session);
    socket.once('close', () => this.closed(session));
    // The server's `error` and `complete` for a subscription end it: it no longer counts.
    // Every error frame leaves with a code, and an unexpected error without its details.
    const send = socket.send.bind(socket) as (...args: unknown[]) => void;
    socket.send = ((data: unknown, ...rest: unknown[]) => {
      if (
        typeof data === 'string' &&
        data.length < 65536 &&
        /^\{"type":"(error|complete)"/.test(data)
      ) {
        const frame = parseFrame(data);
        if (typeof frame?.id === 'string') session.active.delete(frame.id);
        if (frame?.type === 'error' && Array.isArray(frame.payload)) {
          frame.payload = frame.payload.map((error) => this.coded(error));
          send(JSON.stringify(frame), ...rest);
          this.refused(session);
          return;
        }
      }
      send(data, ...rest);
    }) as WebSocket['send'];
  }

  /**
   * Delivers the socket's messages (to this gate and to Mercurius) one per turn of the event
   * loop, in order (common/loop-turns.ts): a TCP read of 100 subscribe frames would otherwise be
   * parsed, checked and executed in one go, on SQLite without ever returning to the event
   * loop, and 20 such sockets stall every HTTP request for seconds. A socket with
   * QUEUED_MESSAGES_PAUSE messages waiting is no longer read until it is down to
   * QUEUED_MESSAGES_RESUME; the messages of a closed socket are dropped.
   */
  private oneMessagePerTurn(session: SocketSession): void {
    const socket = session.socket;
    const emit = socket.emit.bind(socket) as (
      event: string | symbol,
      ...args: unknown[]
    ) => boolean;
    let queued = 0;
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event !== 'message') return emit(event, ...args);
      if (++queued >= QUEUED_MESSAGES_PAUSE && !socket.isPaused) socket.pause();
      void loopTurns.turn().then(() => {
        queued--;
        if (socket.isPaused && queued <= QUEUED_MESSAGES_RESUME && session.open) socket.resume();
        if (session.open) emit(event, ...args);
      });
      return true;
    }) as WebSocket['emit'];
  }

  /** An error for a subscription as the client may see it: with a code, and no internals. */
  private coded(error: unknown): unknown {
    const { message, extensions } = (error ?? {}) as {
      message?: unknown;
      extensions?: { code?: unknown };
    };
    if (typeof extensions?.code === 'string') return error;
    const text = typeof message === 'string' ? message : '';
    if (CLIENT_MISTAKES.some((pattern) => pattern.test(text))) {
      return { ...(error as object), extensions: { code: 'BAD_USER_INPUT' } };
    }
    const malformed = MALFORMED_PAYLOADS.find(([pattern]) => pattern.test(text));
    if (malformed) return { message: malformed[1], extensions: { code: 'BAD_USER_INPUT' } };
    if (/reading 'operation'/.test(text)) {
      return {
        message: 'the document has no single operation to run (name one with operationName)',
        extensions: { code: 'BAD_USER_INPUT' },
      };
    }
    this.logger.error(`subscription failed: ${text}`);
    return { message: 'internal error', extensions: { code: 'INTERNAL' } };
  }

  private received(session: SocketSession, data: Buffer, _isBinary: boolean): void {
    // The frames read here (connection_init, complete) are small; a large one is a
    // subscription, left to Mercurius, and not welcome before the socket was admitted.
    if (data.length > MAX_CONTROL_FRAME) {
      if (!session.request) {
        session.close(CloseCode.BadRequest, 'the first frame must be a small connection_init');
      }
      return;
    }
    let message: { type?: unknown; id?: unknown; payload?: unknown };
    try {
      message = JSON.parse(data.toString('utf8')) as typeof message;
    } catch {
      return; // Mercurius answers a frame that is not JSON
    }
    if (typeof message !== 'object' || message === null) return;
    switch (message.type) {
      case 'connection_init':
        if (session.admission) {
          session.close(CloseCode.TooManyRequests, 'Too many initialisation requests');
          return;
        }
        session.admission = this.admit(session, message.payload);
        return;
      case 'complete':
      case 'stop':
        if (typeof message.id === 'string') session.ended(message.id);
        return;
      default:
        return;
    }
  }

  /** Answers `connection_init`: the caller, or null after closing the socket. */
  private async admit(session: SocketSession, payload: unknown): Promise<SocketRequest | null> {
    const fields = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<
      string,
      unknown
    >;
    const header = fields.authorization ?? fields.Authorization;
    if (typeof header !== 'string') {
      session.close(
        CloseCode.Forbidden,
        'UNAUTHENTICATED: connection_init payload.authorization must be the string "Bearer <token>"',
      );
      return null;
    }
    let principal: Principal;
    try {
      principal = await this.auth.authenticate(header);
    } catch (error) {
      session.close(CloseCode.Forbidden, `UNAUTHENTICATED: ${(error as Error).message}`);
      return null;
    }
    if (!session.open) return null;
    let mine = this.byPrincipal.get(principal.name);
    if ((mine?.size ?? 0) >= this.limits.maxSocketsPerPrincipal) {
      session.close(
        CloseCode.TooManyRequests,
        `RATE_LIMITED: ${principal.name} already has ${this.limits.maxSocketsPerPrincipal} open sockets`,
      );
      return null;
    }
    if (!mine) this.byPrincipal.set(principal.name, (mine = new Set()));
    mine.add(session);
    if (session.initTimer) clearTimeout(session.initTimer);
    session.request = { headers: { authorization: header }, principal };
    this.expireAt(session, principal);
    return session.request;
  }

  private closed(session: SocketSession): void {
    if (session.initTimer) clearTimeout(session.initTimer);
    if (session.expiryTimer) clearTimeout(session.expiryTimer);
    session.active.clear();
    session.starting.clear();
    session.endedEarly.clear();
    const name = session.request?.principal.name;
    if (name === undefined) return;
    const mine = this.byPrincipal.get(name);
    mine?.delete(session);
    if (mine?.size === 0) this.byPrincipal.delete(name);
  }

  /**
   * Counts a refused subscription against its socket: every `error` frame the socket is
   * sent, whatever refused it (these hooks, the role and scope guard of the resolver, the
   * feed). Mercurius keeps a little state for each refused subscription until the socket
   * closes, so a socket refused more than ten times its subscription cap is closed (4429).
   */
  private refused(session: SocketSession): void {
    if (++session.refusals <= this.limits.maxSubscriptionsPerSocket * 10) return;
    if (session.open) {
      this.logger.warn(
        `socket of ${session.request?.principal.name ?? '(not admitted)'} closed: ${session.refusals} refused subscriptions`,
      );
    }
    session.close(
      CloseCode.TooManyRequests,
      'RATE_LIMITED: too many refused subscriptions on this socket',
    );
  }

  /**
   * Before Mercurius parses a subscription: the socket's token still authenticates, and the
   * socket has room. One socket's subscriptions are admitted one at a time, in order: each
   * authenticates the token again (a read of the database on PostgreSQL), and a flood of
   * subscribe frames on one socket would otherwise take every pooled connection at once and
   * make /health and every other request wait behind it.
   */
  private admitSubscription(
    context: SubscriptionContext,
    id: string,
    source: string,
  ): Promise<void> {
    const admit = () => this.admitOne(context, id, source);
    return context.planfenceSocket?.admissions.run(admit) ?? admit();
  }

  private async admitOne(context: SubscriptionContext, id: string, source: string): Promise<void> {
    const session = context.planfenceSocket;
    if (!session?.request) {
      throw new SocketError('UNAUTHENTICATED', 'this socket has no authenticated connection_init');
    }
    if (session.active.has(id)) {
      throw new SocketError(
        'BAD_USER_INPUT',
        `subscription id "${id}" is already in use on this socket`,
      );
    }
    if (session.active.size >= this.limits.maxSubscriptionsPerSocket) {
      throw new SocketError(
        'RATE_LIMITED',
        `this socket already holds ${this.limits.maxSubscriptionsPerSocket} subscriptions (PLANFENCE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET)`,
      );
    }
    session.active.add(id);
    if (!(await this.stillValid(session))) {
      session.active.delete(id);
      throw new SocketError('UNAUTHENTICATED', "this socket's token no longer authenticates");
    }
    if (!session.active.has(id)) {
      throw new SocketError('BAD_USER_INPUT', `subscription "${id}" was ended before it started`);
    }
    session.starting.set(id, source);
    // The guard reads the caller from the request; give it the one just checked.
    context.req = session.request;
  }

  /** Before a subscription executes: its document is one that passed `admitSubscription` and is small and valid. */
  private async checkDocument(
    schema: GraphQLSchema,
    document: DocumentNode,
    context: SubscriptionContext,
    id: string,
  ): Promise<void> {
    const session = context.planfenceSocket;
    const source = session?.starting.get(id);
    if (source === undefined || !session?.starting.delete(id)) {
      if (session?.endedEarly.delete(id)) {
        throw new SocketError('BAD_USER_INPUT', `subscription "${id}" was ended before it started`);
      }
      // Mercurius skips the parsing hook when `query` is not a string (a pre-parsed document).
      throw new SocketError('BAD_USER_INPUT', 'a subscription query must be a string');
    }
    let problem = this.checked.get(source);
    if (problem === undefined) {
      problem = shapeProblem(document, this.limits.maxSubscriptionFields);
      if (problem === null) {
        const errors = validate(schema, document);
        if (errors.length) {
          problem = errors
            .slice(0, 3)
            .map((e) => e.message)
            .join('; ');
        }
      }
      if (source.length <= CHECKED_DOCUMENT_CHARS) {
        if (this.checked.size >= CHECKED_DOCUMENTS) {
          this.checked.delete(this.checked.keys().next().value as string);
        }
        this.checked.set(source, problem);
      }
    }
    if (problem !== null) throw new SocketError('BAD_USER_INPUT', problem);
    return Promise.resolve();
  }

  /** Authenticates the socket's token again; closes the socket (4403) when it no longer does. */
  private async stillValid(session: SocketSession): Promise<boolean> {
    const request = session.request;
    if (!request || !session.open) return false;
    return this.settle([session], request.headers.authorization);
  }

  /**
   * Authenticates `header` once for `group` (sockets that sent it): each keeps the fresh
   * principal, or is closed (4403) with the reason when the token no longer authenticates.
   */
  private async settle(group: SocketSession[], header: string): Promise<boolean> {
    let principal: Principal;
    try {
      principal = await this.auth.authenticate(header);
    } catch (error) {
      for (const session of group) {
        session.close(CloseCode.Forbidden, `UNAUTHENTICATED: ${(error as Error).message}`);
      }
      return false;
    }
    for (const session of group) {
      if (session.request) session.request.principal = principal;
      this.expireAt(session, principal);
    }
    return true;
  }

  /** A principal whose token expires (when it has `expiresAt`) is checked again at that moment. */
  private expireAt(session: SocketSession, principal: Principal): void {
    const expiresAt = (principal as { expiresAt?: Date | null }).expiresAt;
    if (session.expiryTimer) clearTimeout(session.expiryTimer);
    session.expiryTimer = null;
    if (!(expiresAt instanceof Date)) return;
    const wait = Math.min(Math.max(expiresAt.getTime() - Date.now(), 0) + 10, 2 ** 31 - 1);
    session.expiryTimer = setTimeout(() => void this.stillValid(session), wait);
    session.expiryTimer.unref();
  }

  private async recheck(name: string): Promise<void> {
    const mine = this.byPrincipal.get(name);
    if (!mine) return;
    const byHeader = new Map<string, SocketSession[]>();
    for (const session of mine) {
      const header = session.request?.headers.authorization;
      if (header === undefined || !session.open) continue;
      byHeader.set(header, [...(byHeader.get(header) ?? []), session]);
    }
    await Promise.all(
      [...byHeader].map(([header, group]) => this.settle(group, header).catch(() => false)),
    );
  }

  private async recheckAll(): Promise<void> {
    for (const name of [...this.byPrincipal.keys()]) {
      try {
        await this.recheck(name);
      } catch (error) {
        this.logger.warn(`socket re-check of ${name} failed: ${(error as Error).message}`);
      }
    }
  }
}

/** A socket with this many messages waiting for their turn is no longer read... */
const QUEUED_MESSAGES_PAUSE = 256;
/** ...until it is down to this many. */
const QUEUED_MESSAGES_RESUME = 64;

/** Query texts whose check the gate remembers, each of at most CHECKED_DOCUMENT_CHARS. */
const CHECKED_DOCUMENTS = 256;
const CHECKED_DOCUMENT_CHARS = 16 * 1024;

/** Bytes of the largest frame the gate reads itself (connection_init, complete). */
const MAX_CONTROL_FRAME = 64 * 1024;

/** What Mercurius reports without a code when a client sent something it cannot run. */
const CLIENT_MISTAKES = [
  /^Syntax Error: /,
  /^Message must be a JSON string$/,
  /^Invalid payload type$/,
  /^Must provide document\.$/,
  /^Invalid operation: /,
  /^Unknown extension /,
  /^Graphql validation error$/,
  // graphql-js coercing the variables (as over HTTP).
  /^Variable "\$[_A-Za-z][_0-9A-Za-z]*" /,
  /^Variables must be provided as an Object /,
];

/**
 * What Mercurius throws, without a code, for a subscribe frame whose payload is not
 * `{ query, variables?, operationName? }`: the message the client gets instead.
 */
const MALFORMED_PAYLOADS: [RegExp, string][] = [
  [
    /^Cannot destructure property '\w+' of 'payload' as it is (null|undefined)\.$/,
    'a subscribe frame needs a payload: { query, variables?, operationName? }',
  ],
  [/^documentAST\.definitions is not iterable$/, 'payload.query must be a string'],
];

function parseFrame(frame: string): { type?: unknown; id?: unknown; payload?: unknown } | null {
  try {
    const parsed = JSON.parse(frame) as unknown;
    return typeof parsed === 'object' && parsed !== null ? parsed : null;
  } catch {
    return null;
  }
}

/**
 * Why a subscription document is refused before validation, or null: each operation selects
 * exactly one root field, and the document selects at most `maxFields` fields counted with
 * every fragment spread expanded (so a fragment cycle or a fragment bomb stops the count).
 */
export function shapeProblem(document: DocumentNode, maxFields: number): string | null {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition);
  }
  let fields = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const roots = countFields(definition.selectionSet, fragments, 2, false);
    if (roots !== 1) {
      return `a subscription selects exactly one root field (this one selects ${roots > 1 ? 'more' : 'none'})`;
    }
    fields += countFields(definition.selectionSet, fragments, maxFields + 1 - fields, true);
    if (fields > maxFields) {
      return `a subscription selects at most ${maxFields} fields, fragments expanded (PLANFENCE_WS_MAX_SUBSCRIPTION_FIELDS)`;
    }
  }
  return null;
}

/** Fields under `root` (fragments expanded; nested ones too when `deep`), counting stops at `budget`. */
function countFields(
  root: SelectionSetNode,
  fragments: Map<string, FragmentDefinitionNode>,
  budget: number,
  deep: boolean,
): number {
  let count = 0;
  let expansions = 0;
  const stack: SelectionSetNode[] = [root];
  while (stack.length && count < budget) {
    // A spread expands to nothing new forever in a cycle: the expansions are bounded too.
    if (++expansions > budget * 4 + 16) return budget;
    for (const selection of stack.pop()!.selections) {
      if (selection.kind === Kind.FIELD) {
        count++;
        if (deep && selection.selectionSet) stack.push(selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        stack.push(selection.selectionSet);
      } else {
        const fragment = fragments.get(selection.name.value);
        if (fragment) stack.push(fragment.selectionSet);
      }
    }
  }
  return Math.min(count, budget);
}
