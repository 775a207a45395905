/**
 * Plays the hostile probe against a running planfence and says, attack by attack,
 * whether the service held:
 *
 *   npm run test:hostile -- --url http://127.0.0.1:4000 [--token ADMIN_TOKEN]
 *
 * One line per attack (name, expected, observed, held/BROKEN), then
 * `attacks=N held=N`; the exit status is 1 when any attack was not held. With an ADMIN
 * token the player issues its own principals (VIEWER, REVIEWER, AGENT; names with a
 * random suffix) and creates its own environments; without one, the attacks that need
 * a role are listed as skipped. See docs/hostile.md.
 */
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

export interface PlayOptions {
  url: string;
  /** An ADMIN token: lets the player create principals and environments. */
  adminToken?: string;
  /** How long the slow-body attack waits for the server to close the connection. */
  slowBodySeconds?: number;
  /** How long a WebSocket may stay open without `connection_init` before it counts as not closed. */
  wsInitSeconds?: number;
  /** Generations one request may burn through acquireLease aliases and still count as held. */
  leaseCap?: number;
  /** How long to wait for an answer to any one request. */
  requestSeconds?: number;
  /** Play only these attacks (by name); default: all. */
  only?: string[];
}

export interface Verdict {
  name: string;
  expected: string;
  observed: string;
  /** null: not played (it needs a role and no --token was given). */
  held: boolean | null;
}

interface Roles {
  admin: string;
  viewer: string;
  reviewer: string;
  agent: string;
  /** An AGENT of its own for the lease flood, so that its quota does not hold up the other attacks. */
  flooder: string;
  viewerName: string;
  /** Environments created for the probe. */
  env: string;
  leaseEnv: string;
  textEnv: string;
  suffix: string;
}

interface Context {
  url: string;
  options: Required<Omit<PlayOptions, 'adminToken' | 'only'>>;
  roles: Roles | null;
}

export interface Attack {
  name: string;
  expected: string;
  needsRoles: boolean;
  play(ctx: Context): Promise<{ observed: string; held: boolean }>;
}

// ---------------------------------------------------------------- HTTP helpers

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** One HTTP request with a raw body; never throws for a status, only for a broken connection. */
function http(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer },
  timeoutMs: number,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(
      target,
      { method: options.method ?? 'GET', headers: options.headers, timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any = null;
          try {
            json = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    if (options.body !== undefined) req.end(options.body);
    else req.end();
  });
}

function postJson(ctx: Context, body: unknown, token?: string | null): Promise<HttpAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  return http(
    `${ctx.url}/graphql`,
    { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) },
    ctx.options.requestSeconds * 1000,
  );
}

function gql(ctx: Context, token: string | null, query: string, variables = {}) {
  return postJson(ctx, { query, variables }, token);
}

/** The first error's code, or 'OK'. */
function codeOf(answer: HttpAnswer): string {
  const error = answer.json?.errors?.[0];
  if (error) return String(error.extensions?.code ?? 'UNCODED');
  return answer.status >= 400 ? `HTTP_${answer.status}` : 'OK';
}

const hasData = (answer: HttpAnswer) =>
  answer.json?.data != null && Object.values(answer.json.data).some((v) => v != null);

function short(text: string | null | undefined, max = 90): string {
  const s = (text ?? '').replace(/\s+/g, ' ');
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function describe(answer: HttpAnswer): string {
  const error = answer.json?.errors?.[0];
  const message = error ? ` "${short(error.message, 70)}"` : '';
  return `HTTP ${answer.status} ${codeOf(answer)}${message}`;
}

/** /health must answer within this while an attack is being handled. */
const HEALTH_PROMPT_MS = 2000;

/** Whether the service still answers /health (any HTTP status), and how fast. */
async function healthCheck(ctx: Context): Promise<{ answered: boolean; ms: number; text: string }> {
  const started = Date.now();
  try {
    const answer = await http(`${ctx.url}/health`, {}, ctx.options.requestSeconds * 1000);
    const ms = Date.now() - started;
    return { answered: true, ms, text: `/health ${answer.status} in ${ms} ms` };
  } catch (error) {
    const ms = Date.now() - started;
    return { answered: false, ms, text: `/health did not answer (${(error as Error).message})` };
  }
}

function aliases(count: number, field: (i: number) => string): string {
  const parts: string[] = new Array<string>(count);
  for (let i = 0; i < count; i++) parts[i] = `a${i}:${field(i)}`;
  return parts.join(' ');
}

/** A refusal: a 4xx, or a GraphQL error with one of `codes` and no data. */
function refused(answer: HttpAnswer, codes: string[], httpStatuses: number[] = []): boolean {
  if (httpStatuses.includes(answer.status)) return true;
  return codes.includes(codeOf(answer)) && !hasData(answer) && answer.status < 500;
}

// ---------------------------------------------------------------- WebSocket helpers

interface WsSession {
  socket: WebSocket;
  messages: any[];
  closed: Promise<{ code: number; reason: string }>;
  isClosed(): boolean;
  send(message: unknown): void;
  /** Resolves with the first message that matches, or null after `ms`. */
  waitFor(match: (message: any) => boolean, ms: number): Promise<any>;
  close(): void;
}

function wsOpen(ctx: Context): Promise<WsSession> {
  const url = `${ctx.url.replace(/^http/, 'ws')}/graphql`;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    const messages: any[] = [];
    const listeners = new Set<() => void>();
    let isClosed = false;
    const closed = new Promise<{ code: number; reason: string }>((done) =>
      socket.on('close', (code, reason) => {
        isClosed = true;
        listeners.forEach((notify) => notify());
        done({ code, reason: reason.toString() });
      }),
    );
    socket.on('message', (data: Buffer) => {
      try {
        const message = JSON.parse(data.toString());
        // Keep-alive: a ping unanswered must not be what closes the socket.
        if (message?.type === 'ping') socket.send(JSON.stringify({ type: 'pong' }));
        messages.push(message);
      } catch {
        messages.push({ type: 'unparsable', data: data.toString() });
      }
      listeners.forEach((notify) => notify());
    });
    socket.on('error', (error) => {
      if (socket.readyState === WebSocket.CONNECTING) reject(error);
    });
    socket.on('open', () =>
      resolve({
        socket,
        messages,
        closed,
        isClosed: () => isClosed,
        send: (message) => {
          if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
        },
        waitFor: (match, ms) =>
          new Promise((done) => {
            const check = () => {
              const found = messages.find(match);
              if (found || isClosed) finish(found ?? null);
            };
            const timer = setTimeout(() => finish(null), ms);
            const finish = (value: any) => {
              clearTimeout(timer);
              listeners.delete(check);
              done(value);
            };
            listeners.add(check);
            check();
          }),
        close: () => socket.terminate(),
      }),
    );
  });
}

/** Opens a graphql-ws session and sends `connection_init` with the token; waits for the acknowledgement. */
async function wsSession(ctx: Context, token: string): Promise<WsSession> {
  const session = await wsOpen(ctx);
  session.send({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
  await session.waitFor((m) => m.type === 'connection_ack', ctx.options.requestSeconds * 1000);
  return session;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Messages of one subscription id, by type. */
const ofId = (session: WsSession, id: string, type?: string) =>
  session.messages.filter((m) => m.id === id && (!type || m.type === type));

// ---------------------------------------------------------------- the attacks

const mustRoles = (ctx: Context): Roles => {
  if (!ctx.roles) throw new Error('needs --token');
  return ctx.roles;
};

export const ATTACKS: Attack[] = [
  {
    name: 'aliases-50k-whoami-no-token',
    expected: 'BAD_USER_INPUT or HTTP 413; /health answers meanwhile',
    needsRoles: false,
    async play(ctx) {
      const query = `{${aliases(50_000, () => 'whoami{name}')}}`;
      const attack = postJson(ctx, { query }).then(
        (answer) => ({ answer, failure: null }),
        (error: Error) => ({ answer: null, failure: error.message }),
      );
      await sleep(20);
      const health = await healthCheck(ctx);
      const { answer, failure } = await attack;
      const prompt = health.answered && health.ms <= HEALTH_PROMPT_MS;
      return {
        observed: `${answer ? describe(answer) : `no answer (${short(failure, 50)})`}; ${health.text}`,
        held: answer !== null && refused(answer, ['BAD_USER_INPUT'], [413]) && prompt,
      };
    },
  },
  {
    name: 'aliases-300k-typename',
    expected: 'refused (4xx or BAD_USER_INPUT, no data)',
    needsRoles: false,
    async play(ctx) {
      const answer = await postJson(ctx, { query: `{${aliases(300_000, () => '__typename')}}` });
      const health = await healthCheck(ctx);
      return {
        observed: `${describe(answer)}; ${health.text}`,
        held:
          (refused(answer, ['BAD_USER_INPUT', 'UNAUTHENTICATED']) ||
            (answer.status >= 400 && answer.status < 500)) &&
          health.answered,
      };
    },
  },
  {
    name: 'viewer-20-aliases-of-plans-content',
    expected: 'BAD_USER_INPUT before execution (no data)',
    needsRoles: true,
    async play(ctx) {
      const roles = mustRoles(ctx);
      const query = `{${aliases(20, () => `plans(environment:"${roles.env}",first:500){content}`)}}`;
      const answer = await gql(ctx, roles.viewer, query);
      return {
        observed: describe(answer) + (hasData(answer) ? ' with data' : ''),
        held: refused(answer, ['BAD_USER_INPUT'], [413]),
      };
    },
  },
  {
    name: 'slow-body',
    expected: 'the server closes the connection within its request timeout',
    needsRoles: false,
    async play(ctx) {
      const outcome = await slowBody(ctx);
      return { observed: outcome.observed, held: outcome.closed };
    },
  },
  {
    name: 'websocket-without-connection-init',
    expected: 'the server closes the socket',
    needsRoles: false,
    async play(ctx) {
      const session = await wsOpen(ctx);
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([
        session.closed,
        new Promise<null>(
          (resolve) => (timer = setTimeout(() => resolve(null), ctx.options.wsInitSeconds * 1000)),
        ),
      ]);
      clearTimeout(timer);
      session.close();
      return result
        ? {
            observed: `closed after ${((Date.now() - started) / 1000).toFixed(1)} s (code ${result.code}${result.reason ? ` ${short(result.reason, 40)}` : ''})`,
            held: true,
          }
        : { observed: `still open after ${ctx.options.wsInitSeconds} s`, held: false };
    },
  },
  {
    name: 'subscription-with-revoked-token',
    expected: 'an open subscription ends at revocation; a revoked token is refused',
    needsRoles: true,
    async play(ctx) {
      return revokedSubscription(ctx, mustRoles(ctx));
    },
  },
  {
    name: 'subscription-with-2000-root-fields',
    expected: 'refused (error or close, no events)',
    needsRoles: true,
    async play(ctx) {
      const roles = mustRoles(ctx);
      const session = await wsSession(ctx, roles.viewer);
      try {
        if (session.isClosed()) return { observed: 'viewer session was closed', held: false };
        const query = `subscription{${aliases(2000, () => `auditEventRecorded(environment:"${roles.env}"){id}`)}}`;
        session.send({ id: 'wide', type: 'subscribe', payload: { query } });
        const answer = await session.waitFor(
          (m) => m.id === 'wide' && (m.type === 'error' || m.type === 'complete'),
          ctx.options.requestSeconds * 1000,
        );
        // Would it deliver? Cause one event in that environment.
        await gql(
          ctx,
          roles.agent,
          'mutation($e:String!){acquireLease(input:{environment:$e,ttlSeconds:1}){generation}}',
          { e: roles.env },
        );
        await sleep(300);
        const delivered = ofId(session, 'wide', 'next').length;
        const how = answer
          ? `${answer.type}${answer.payload?.[0]?.message ? ` "${short(answer.payload[0].message, 60)}"` : ''}`
          : session.isClosed()
            ? 'socket closed'
            : 'no refusal';
        return {
          observed: `${how}; ${delivered} event(s) delivered`,
          held: (answer !== null || session.isClosed()) && delivered === 0,
        };
      } finally {
        session.close();
      }
    },
  },
  {
    name: 'reject-plan-with-huge-generation',
    expected:
      'BAD_USER_INPUT; auditEvents{generation} still readable; no audit row for an unknown environment',
    needsRoles: true,
    async play(ctx) {
      const roles = mustRoles(ctx);
      const reject = 'mutation($id:ID!){rejectPlan(input:{planId:$id,reason:"hostile probe"}){id}}';
      const known = await gql(ctx, roles.reviewer, reject, { id: `${roles.env}@9999999999.1` });
      const ghost = `${roles.env}-ghost`;
      const unknown = await gql(ctx, roles.reviewer, reject, { id: `${ghost}@9999999999.1` });
      const read = await gql(
        ctx,
        roles.viewer,
        'query($e:String!){auditEvents(environment:$e,first:500){generation}}',
        { e: roles.env },
      );
      await gql(
        ctx,
        roles.admin,
        'mutation($e:String!){createEnvironment(input:{name:$e}){name}}',
        { e: ghost },
      );
      const ghostRead = await gql(
        ctx,
        roles.viewer,
        'query($e:String!){auditEvents(environment:$e,first:500){action generation}}',
        { e: ghost },
      );
      const ghostRejections = (ghostRead.json?.data?.auditEvents ?? []).filter(
        (e: { action: string }) => e.action === 'REJECT_PLAN',
      ).length;
      return {
        observed: `known env ${codeOf(known)}, unknown env ${codeOf(unknown)}; auditEvents ${codeOf(read)}; later-created env shows ${ghostRejections} REJECT_PLAN row(s) (${codeOf(ghostRead)})`,
        held:
          codeOf(known) === 'BAD_USER_INPUT' &&
          codeOf(unknown) === 'BAD_USER_INPUT' &&
          codeOf(read) === 'OK' &&
          codeOf(ghostRead) === 'OK' &&
          ghostRejections === 0,
      };
    },
  },
  {
    name: 'acquire-lease-5000-aliases',
    expected: 'refused or RATE_LIMITED; at most the lease cap of generations burnt',
    needsRoles: true,
    async play(ctx) {
      const roles = mustRoles(ctx);
      const query = `mutation{${aliases(5000, () => `acquireLease(input:{environment:"${roles.leaseEnv}",ttlSeconds:1}){generation}`)}}`;
      const answer = await gql(ctx, roles.flooder, query);
      const after = await gql(
        ctx,
        roles.viewer,
        'query($e:String!){environment(name:$e){lastIssuedGeneration}}',
        {
          e: roles.leaseEnv,
        },
      );
      const burnt = Number(after.json?.data?.environment?.lastIssuedGeneration ?? NaN);
      const codes = new Set<string>(
        (answer.json?.errors ?? []).map((e: any) => String(e.extensions?.code ?? 'UNCODED')),
      );
      return {
        observed: `HTTP ${answer.status} ${[...codes].join(',') || 'no errors'}; ${burnt} generation(s) burnt`,
        held: Number.isFinite(burnt) && burnt <= ctx.options.leaseCap && answer.status < 500,
      };
    },
  },
  {
    name: 'nul-in-title-and-lone-surrogate-in-content',
    expected: 'BAD_USER_INPUT for both; nothing stored',
    needsRoles: true,
    async play(ctx) {
      const roles = mustRoles(ctx);
      const lease = await gql(
        ctx,
        roles.agent,
        'mutation($e:String!){acquireLease(input:{environment:$e,ttlSeconds:600}){generation}}',
        { e: roles.textEnv },
      );
      const generation = Number(lease.json?.data?.acquireLease?.generation ?? 0);
      if (!generation) return { observed: `no lease: ${describe(lease)}`, held: false };
      const submit = 'mutation($input:SubmitPlanInput!){submitPlan(input:$input){id contentHash}}';
      const base = { environment: roles.textEnv, generation };
      const nul = await gql(ctx, roles.agent, submit, {
        input: { ...base, idempotencyKey: `nul-${roles.suffix}`, title: 'a\u0000b', content: 'x' },
      });
      const surrogate = await gql(ctx, roles.agent, submit, {
        input: { ...base, idempotencyKey: `sur-${roles.suffix}`, content: 'x\ud800y' },
      });
      const stored = await gql(
        ctx,
        roles.viewer,
        'query($e:String!){plans(environment:$e,first:10){id}}',
        { e: roles.textEnv },
      );
      const count = stored.json?.data?.plans?.length ?? NaN;
      return {
        observed: `NUL title ${codeOf(nul)}, lone surrogate ${codeOf(surrogate)}; ${count} plan(s) stored`,
        held:
          codeOf(nul) === 'BAD_USER_INPUT' && codeOf(surrogate) === 'BAD_USER_INPUT' && count === 0,
      };
    },
  },
  {
    name: 'query-is-a-number',
    expected: 'HTTP 400 with code BAD_USER_INPUT',
    needsRoles: false,
    async play(ctx) {
      const answer = await postJson(ctx, '{"query":5}');
      return {
        observed: describe(answer),
        held: answer.status === 400 && codeOf(answer) === 'BAD_USER_INPUT',
      };
    },
  },
  {
    name: 'operation-name-6mb',
    expected: '4xx; the process still answers',
    needsRoles: false,
    async play(ctx) {
      let observed: string;
      let status = 0;
      try {
        const answer = await postJson(ctx, {
          query: '{__typename}',
          operationName: 'A'.repeat(6_000_000),
        });
        status = answer.status;
        observed = describe(answer);
      } catch (error) {
        observed = `connection ended (${short((error as Error).message, 50)})`;
      }
      const health = await healthCheck(ctx);
      return {
        observed: `${observed}; ${health.text}`,
        held: status >= 400 && status < 500 && health.answered,
      };
    },
  },
  {
    name: 'introspection-without-token',
    expected: 'refused (no schema)',
    needsRoles: false,
    async play(ctx) {
      const answer = await postJson(ctx, { query: '{__schema{types{name}}}' });
      const leaked = Array.isArray(answer.json?.data?.__schema?.types);
      return { observed: describe(answer) + (leaked ? ' with the schema' : ''), held: !leaked };
    },
  },
  {
    name: 'graphiql',
    expected: '/graphiql not served, or served without a third-party script',
    needsRoles: false,
    async play(ctx) {
      const page = `${ctx.url}/graphiql`;
      const answer = await http(page, {}, ctx.options.requestSeconds * 1000);
      if (answer.status !== 200) return { observed: `HTTP ${answer.status}`, held: true };
      const origin = new URL(ctx.url).origin;
      const referenced = [
        ...answer.text.matchAll(/<(?:script|link)\b[^>]*(?:src|href)\s*=\s*["']([^"']+)["']/gi),
      ].map((m) => new URL(m[1], page).href);
      // Its own scripts may load more: scan them for scripts and styles from elsewhere.
      const loaded: string[] = [];
      for (const url of referenced.filter((u) => u.startsWith(origin)).slice(0, 10)) {
        const script = await http(url, {}, ctx.options.requestSeconds * 1000);
        loaded.push(
          ...[...script.text.matchAll(/https?:\/\/[^\s"'`)]+\.(?:m?js|css)\b/g)].map((m) => m[0]),
        );
      }
      const external = [...referenced, ...loaded].filter((u) => !u.startsWith(origin));
      return {
        observed: external.length
          ? `HTTP 200 loading ${external.length} third-party resource(s), e.g. ${short(external[0], 60)}`
          : 'HTTP 200, own assets only',
        held: external.length === 0,
      };
    },
  },
  {
    name: 'security-headers',
    expected: "CSP with frame-ancestors 'none', X-Content-Type-Options nosniff on /",
    needsRoles: false,
    async play(ctx) {
      const answer = await http(`${ctx.url}/`, {}, ctx.options.requestSeconds * 1000);
      const csp = String(answer.headers['content-security-policy'] ?? '');
      const nosniff = String(answer.headers['x-content-type-options'] ?? '').toLowerCase();
      const frame = /frame-ancestors\s+'none'/i.test(csp);
      const missing = [
        csp ? null : 'CSP',
        csp && !frame ? "frame-ancestors 'none'" : null,
        nosniff === 'nosniff' ? null : 'nosniff',
      ].filter(Boolean);
      return {
        observed: missing.length ? `missing: ${missing.join(', ')}` : 'all present',
        held: missing.length === 0,
      };
    },
  },
];

/** Sends headers and a body promised large, then one byte a second until the server closes. */
function slowBody(ctx: Context): Promise<{ closed: boolean; observed: string }> {
  const target = new URL(ctx.url);
  const secure = target.protocol === 'https:';
  const port = Number(target.port || (secure ? 443 : 80));
  return new Promise((resolve) => {
    const socket: Socket = secure
      ? tlsConnect({ host: target.hostname, port, servername: target.hostname })
      : netConnect({ host: target.hostname, port });
    const started = Date.now();
    let answer = '';
    let settled = false;
    const finish = (closed: boolean, observed: string) => {
      if (settled) return;
      settled = true;
      clearInterval(drip);
      clearTimeout(limit);
      socket.destroy();
      resolve({ closed, observed });
    };
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('close', () => {
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
      finish(true, `closed by the server after ${elapsed()}${status ? ` (HTTP ${status})` : ''}`);
    });
    socket.on('error', () => undefined);
    socket.on(secure ? 'secureConnect' : 'connect', () =>
      socket.write(
        `POST /graphql HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
      ),
    );
    const drip = setInterval(() => socket.write(' '), 1000);
    const limit = setTimeout(
      () => finish(false, `still open after ${ctx.options.slowBodySeconds} s`),
      ctx.options.slowBodySeconds * 1000,
    );
  });
}

async function revokedSubscription(
  ctx: Context,
  roles: Roles,
): Promise<{ observed: string; held: boolean }> {
  // A VIEWER of its own, revoked while its subscription is open.
  const name = `${roles.viewerName}-r`;
  const issued = await gql(
    ctx,
    roles.admin,
    'mutation($n:String!){issueToken(name:$n,role:VIEWER){token}}',
    { n: name },
  );
  const token = issued.json?.data?.issueToken?.token as string | undefined;
  if (!token) return { observed: `could not issue a token: ${describe(issued)}`, held: false };
  const cause = () =>
    gql(
      ctx,
      roles.agent,
      'mutation($e:String!){acquireLease(input:{environment:$e,ttlSeconds:1}){generation}}',
      { e: roles.env },
    );
  const query = 'subscription($e:String!){auditEventRecorded(environment:$e){id}}';
  const session = await wsSession(ctx, token);
  try {
    session.send({
      id: 'before',
      type: 'subscribe',
      payload: { query, variables: { e: roles.env } },
    });
    await sleep(200);
    await cause();
    const live = await session.waitFor((m) => m.id === 'before' && m.type === 'next', 3000);
    await gql(ctx, roles.admin, 'mutation($n:String!){revokeToken(name:$n){name}}', { n: name });
    const revokedAt = session.messages.length;
    await sleep(500);
    await cause();
    const ended = await Promise.race([
      session.closed.then(() => 'socket closed'),
      session
        .waitFor((m) => m.id === 'before' && (m.type === 'complete' || m.type === 'error'), 3000)
        .then((m) => (m ? `subscription ${m.type}` : null)),
    ]);
    const after = session.messages.slice(revokedAt).filter((m) => m.type === 'next').length;
    // The socket, if still open, must not start a new subscription for the revoked token.
    let again = 'socket closed';
    if (!session.isClosed()) {
      session.send({
        id: 'after',
        type: 'subscribe',
        payload: { query, variables: { e: roles.env } },
      });
      await sleep(200);
      await cause();
      const reply = await session.waitFor((m) => m.id === 'after' && m.type === 'next', 2000);
      const refusal = ofId(session, 'after').find(
        (m) => m.type === 'error' || m.type === 'complete',
      );
      again = reply
        ? 'a new subscription delivered'
        : `a new subscription ${refusal?.type ?? 'delivered nothing'}`;
    }
    // A fresh socket with the revoked token.
    const fresh = await wsOpen(ctx);
    fresh.send({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
    const ack = await fresh.waitFor((m) => m.type === 'connection_ack', 2000);
    let freshDelivered = false;
    if (ack && !fresh.isClosed()) {
      fresh.send({ id: 'x', type: 'subscribe', payload: { query, variables: { e: roles.env } } });
      await sleep(200);
      await cause();
      freshDelivered =
        (await fresh.waitFor((m) => m.id === 'x' && m.type === 'next', 2000)) !== null;
    }
    const freshOutcome = !ack
      ? 'not acknowledged'
      : freshDelivered
        ? 'acknowledged and delivered'
        : 'acknowledged, nothing delivered';
    fresh.close();
    return {
      observed: `live before: ${live ? 'yes' : 'no'}; after revoke: ${ended ?? 'still open'}, ${after} event(s); ${again}; new socket: ${freshOutcome}`,
      held:
        ended !== null &&
        after === 0 &&
        again !== 'a new subscription delivered' &&
        !freshDelivered,
    };
  } finally {
    session.close();
  }
}

// ---------------------------------------------------------------- setting up and playing

async function setUp(ctx: Context, admin: string): Promise<Roles> {
  const suffix = randomBytes(4).toString('hex');
  const issue = async (name: string, role: string) => {
    const answer = await gql(
      ctx,
      admin,
      'mutation($n:String!,$r:Role!){issueToken(name:$n,role:$r){token}}',
      { n: name, r: role },
    );
    const token = answer.json?.data?.issueToken?.token;
    if (!token) throw new Error(`issueToken ${name}: ${describe(answer)}`);
    return token as string;
  };
  const create = async (name: string) => {
    const answer = await gql(
      ctx,
      admin,
      'mutation($e:String!){createEnvironment(input:{name:$e}){name}}',
      { e: name },
    );
    if (codeOf(answer) !== 'OK') throw new Error(`createEnvironment ${name}: ${describe(answer)}`);
  };
  const viewerName = `hostile-viewer-${suffix}`;
  const roles: Roles = {
    admin,
    viewerName,
    viewer: await issue(viewerName, 'VIEWER'),
    reviewer: await issue(`hostile-reviewer-${suffix}`, 'REVIEWER'),
    agent: await issue(`hostile-agent-${suffix}`, 'AGENT'),
    flooder: await issue(`hostile-flooder-${suffix}`, 'AGENT'),
    env: `hostile-${suffix}`,
    leaseEnv: `hostile-${suffix}-leases`,
    textEnv: `hostile-${suffix}-text`,
    suffix,
  };
  for (const env of [roles.env, roles.leaseEnv, roles.textEnv]) await create(env);
  return roles;
}

export function formatVerdict(v: Verdict): string {
  const status = v.held === null ? 'skipped' : v.held ? 'held' : 'BROKEN';
  return `${v.name} | expected: ${v.expected} | observed: ${v.observed} | ${status}`;
}

export function summary(verdicts: Verdict[]): string {
  const played = verdicts.filter((v) => v.held !== null);
  const skipped = verdicts.length - played.length;
  return `attacks=${played.length} held=${played.filter((v) => v.held).length}${skipped ? ` skipped=${skipped}` : ''}`;
}

/** Plays every attack in turn; `print` receives each verdict line as soon as it is known. */
export async function play(
  options: PlayOptions,
  print: (line: string) => void = (line) => console.log(line),
): Promise<Verdict[]> {
  const ctx: Context = {
    url: options.url.replace(/\/+$/, ''),
    options: {
      url: options.url,
      slowBodySeconds: options.slowBodySeconds ?? 60,
      wsInitSeconds: options.wsInitSeconds ?? 15,
      leaseCap: options.leaseCap ?? 120,
      requestSeconds: options.requestSeconds ?? 30,
    },
    roles: null,
  };
  if (options.adminToken) ctx.roles = await setUp(ctx, options.adminToken);
  const verdicts: Verdict[] = [];
  const unknown = (options.only ?? []).filter((name) => !ATTACKS.some((a) => a.name === name));
  if (unknown.length) throw new Error(`no such attack: ${unknown.join(', ')}`);
  for (const attack of ATTACKS.filter((a) => !options.only || options.only.includes(a.name))) {
    let verdict: Verdict;
    if (attack.needsRoles && !ctx.roles) {
      verdict = {
        name: attack.name,
        expected: attack.expected,
        observed: 'needs --token',
        held: null,
      };
    } else {
      try {
        const { observed, held } = await attack.play(ctx);
        verdict = { name: attack.name, expected: attack.expected, observed, held };
      } catch (error) {
        verdict = {
          name: attack.name,
          expected: attack.expected,
          observed: `the attack failed: ${short((error as Error).message, 120)}`,
          held: false,
        };
      }
    }
    verdicts.push(verdict);
    print(formatVerdict(verdict));
  }
  print(summary(verdicts));
  return verdicts;
}

function parseArgs(argv: string[]): PlayOptions {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const url = value('--url');
  if (!url) throw new Error('usage: npm run test:hostile -- --url URL [--token ADMIN_TOKEN]');
  const number = (flag: string) => (value(flag) === undefined ? undefined : Number(value(flag)));
  return {
    url,
    adminToken: value('--token'),
    slowBodySeconds: number('--slow-body-seconds'),
    wsInitSeconds: number('--ws-init-seconds'),
    leaseCap: number('--lease-cap'),
    requestSeconds: number('--request-seconds'),
    only: value('--only')?.split(','),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  play(parseArgs(process.argv.slice(2)))
    .then((verdicts) => process.exit(verdicts.some((v) => v.held === false) ? 1 : 0))
    .catch((error: Error) => {
      console.error(error.message);
      process.exit(2);
    });
}
