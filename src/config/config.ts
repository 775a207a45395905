import { dirname, resolve } from 'node:path';
import { ConfigError } from './config-error.js';
import { type OidcConfig, OidcConfigProblem, readOidcConfig } from './oidc-config.js';
import { readSlackConfig, type SlackConfig } from './slack-config.js';

export { ConfigError };

export type LogFormat = 'auto' | 'json' | 'pretty';

export type SqliteSynchronous = 'FULL' | 'NORMAL';

export type DatabaseConfig =
  | {
      kind: 'sqlite';
      path: string;
      synchronous: SqliteSynchronous;
      /** PLANFENCE_SQLITE_CACHE_MIB: SQLite's page cache, the most it keeps of the file in memory. */
      cacheMiB: number;
      /**
       * PLANFENCE_SQLITE_CHECKPOINT_MS: how often a thread of its own checkpoints the WAL of a
       * database file (0: only the service's connection does, when the WAL reaches 1,000 pages).
       */
      checkpointMs: number;
      /**
       * PLANFENCE_SQLITE_WRITER_THREAD: a database file's common submits are decided and
       * committed by a thread of their own (src/database/sqlite-writer.ts), not the request thread.
       */
      writerThread: boolean;
    }
  | {
      kind: 'postgres';
      url: string;
      poolSize: number;
      /** PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT: one environment's decisions this instance has in the database at once. */
      decisionsPerEnvironment: number;
    };

export interface Config {
  port: number;
  /** PLANFENCE_SLACK_CONFIG (src/slack/slack-config.ts); null: reviews in Slack are off. */
  slack: SlackConfig | null;
  host: string;
  database: DatabaseConfig;
  /** When set, the bearer token of the principal `admin`. */
  adminToken: string | undefined;
  /** Where the first start writes a generated admin token (mode 0600). */
  adminTokenFile: string;
  maxPlanBytes: number;
  /** Largest plan artifact (the binary plan file), in decoded bytes. */
  maxArtifactBytes: number;
  idempotencyTtlMs: number;
  /** Content of superseded, obsolete, rejected and proposed plans is kept this long. */
  planRetentionMs: number;
  /** How often the retention job runs. */
  retentionIntervalMs: number;
  logLevel: string;
  /** `json` lines, `pretty` lines for people, or `auto`: pretty on a terminal, else JSON. */
  logFormat: LogFormat;
  quotas: QuotaConfig;
  sockets: SocketLimits;
  storage: StorageConfig;
  /**
   * /health is 503 while the SQLite file's file system has less free space than this: what
   * the largest allowed write needs (PLANFENCE_STORAGE_MIN_FREE_BYTES; 0: not checked).
   */
  minFreeBytes: number;
  /** Request cost, response size and production defaults of the GraphQL endpoint (docs/limits.md). */
  limits: LimitsConfig;
  /** HTTP server timeouts, body and connection caps, shutdown deadline (docs/limits.md). */
  http: HttpConfig;
  /** OIDC token exchange (docs/identity.md). */
  identity: IdentityConfig;
  /** Webhook delivery (docs/webhooks.md). */
  webhooks: WebhooksConfig;
  /** Subscription catch-up (docs/subscriptions.md). */
  subscriptions: SubscriptionsConfig;
  /** The MCP endpoint (docs/mcp.md). */
  mcp: McpConfig;
  /** Plan policy evaluation (docs/policies.md). */
  policies: PoliciesConfig;
}

/** Plan policies (DESIGN §16, docs/policies.md): the budgets of the worker threads that parse and evaluate them. */
export interface PoliciesConfig {
  /** One policy's evaluation; beyond it the policy failed (and so denies). */
  policyBudgetMs: number;
  /** All the policies of one plan together. */
  planBudgetMs: number;
  /** Parsing one expression when it is saved or tried. */
  parseBudgetMs: number;
  /** Parsing, summarising and masking one Terraform plan document, in its worker's CPU time. */
  terraformBudgetMs: number;
  /** Worker threads (each evaluates one plan at a time). */
  workers: number;
}

/** The MCP endpoint, POST /mcp (DESIGN §14, docs/mcp.md). */
export interface McpConfig {
  /** The service's address as clients reach it (PLANFENCE_PUBLIC_URL); null: from each request's Host. */
  publicUrl: string | null;
  /** Host header values accepted on /mcp; null: loopback names with the listening port, and the public URL's host. */
  allowedHosts: string[] | null;
  /** Origin header values accepted on /mcp (requests without Origin pass); null: the service's own origins. */
  allowedOrigins: string[] | null;
}

/** Webhook delivery: retries, time-outs, parallelism (docs/design.md R23, docs/webhooks.md). */
export interface WebhooksConfig {
  /** A delivery is FAILED after this many attempts... */
  maxAttempts: number;
  /** ...or once its first attempt (or its redelivery) is this old. */
  maxAgeMs: number;
  /** One request's time-out. */
  timeoutMs: number;
  /** A claim lasts its request's time-out plus this (the outcome is still being recorded). */
  claimMarginMs: number;
  /** Requests in flight at once (each to a different (webhook, environment) line), slow ones aside. */
  concurrency: number;
  /** A request in flight longer than this no longer holds a concurrency slot (at most 8 × concurrency in flight). */
  slowAfterMs: number;
  /** Back-off before retry n: random(0, min(max, base · 2^(n-1))). */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** How often the dispatcher looks for due deliveries besides being woken by new ones. */
  pollMs: number;
}

/** Subscription catch-up (docs/subscriptions.md). */
export interface SubscriptionsConfig {
  /** A subscription's `after` replays at most this many events; more is CURSOR_TOO_OLD. */
  replayLimit: number;
  /** Events one principal may have replayed per minute (a token bucket of this size); beyond: RATE_LIMITED. */
  replayEventsPerMinute: number;
  /** Bytes of plan content and summaries one principal may have replayed per minute (a bucket of this size). */
  replayBytesPerMinute: number;
  /** Replays of one principal in progress at once; one more: RATE_LIMITED. */
  maxReplaysPerPrincipal: number;
}

/** OIDC token exchange (docs/design.md §12, docs/identity.md). */
export interface IdentityConfig {
  /** The trusted issuers and their rules (PLANFENCE_OIDC_CONFIG); null: exchange is off. */
  oidc: OidcConfig | null;
  /** A JWKS or discovery fetch that takes longer fails (the exchange is UNAUTHENTICATED). */
  jwksTimeoutMs: number;
  /** After a fetch, an unknown `kid` triggers no new fetch for this long. */
  jwksCooldownMs: number;
  /** A failed discovery or JWKS fetch is answered from memory (refused again) for this long. */
  fetchFailureCacheMs: number;
  /** exchangeOidcToken calls per source address per minute (a token bucket of this size). */
  exchangesPerMinute: number;
  /** Leeway for exp and nbf. */
  clockToleranceSeconds: number;
  /** The longest life of an exchanged token (never beyond the JWT's exp). */
  maxTokenSeconds: number;
}

/**
 * Per-principal rate limits and per-environment quotas, as token buckets kept in each
 * instance's memory: `burst` is the bucket's size, the rate refills it.
 */
export interface QuotaConfig {
  requestsPerSecond: number;
  requestBurst: number;
  writesPerSecond: number;
  writeBurst: number;
  /** acquireLease calls per principal per minute (the bucket holds one minute's worth). */
  leasesPerMinute: number;
  /** Bytes of plan content submitted per environment per hour (the bucket holds one hour's worth). */
  planBytesPerHour: number;
  /** Audit rows of refused (FORBIDDEN) calls per principal per minute; more are refused unrecorded. */
  auditRefusalsPerMinute: number;
}

/** WebSocket (graphql-ws) admission and limits. */
export interface SocketLimits {
  /** A socket that has not sent `connection_init` with a valid token within this is closed (4408). */
  initTimeoutMs: number;
  /** Open subscriptions one socket may hold; more are refused with RATE_LIMITED. */
  maxSubscriptionsPerSocket: number;
  /** Open sockets one principal may hold; one more is closed (4429). */
  maxSocketsPerPrincipal: number;
  /** Field selections in one subscription document, fragments expanded. */
  maxSubscriptionFields: number;
  /** How often every open socket's token is checked again (the backstop to revocation signals). */
  recheckIntervalMs: number;
}

/** Storage safety (docs/operations.md). */
export interface StorageConfig {
  /**
   * SQLite: create a new empty database even where the folder shows one existed, or adopt
   * a database whose id differs from the folder's marker (PLANFENCE_INIT_DATABASE=1).
   */
  initialize: boolean;
  /** How often the service checks that its SQLite file is still the one it opened. */
  checkIntervalMs: number;
  /** /health is 503 this long after a client's write failed for a storage reason, unless one committed since. */
  writeFailureMs: number;
}

export type IntrospectionMode = 'authenticated' | 'open' | 'off';

export interface LimitsConfig {
  /** Largest GraphQL document (the `query` text) in UTF-8 bytes; checked before parsing. */
  maxQueryBytes: number;
  /** Lexical tokens of the document; the parser stops at the next one (a string literal is one). */
  maxTokens: number;
  /** Root fields (aliases included) of one operation. */
  maxRootFields: number;
  /** Fields of one operation, fragments expanded. */
  maxFields: number;
  /** Nesting of selections. */
  maxDepth: number;
  /** Estimated cost: lists multiply by their page size, plan content weighs by its size bound. */
  maxCost: number;
  /** From this estimated cost on, a request is expensive and waits for one of `maxHeavyQueries` slots. */
  heavyQueryCost: number;
  /** Expensive requests executing at once. */
  maxHeavyQueries: number;
  /** How long an expensive request may wait for a slot before RATE_LIMITED. */
  heavyQueryWaitMs: number;
  /** Largest serialized GraphQL response in bytes. */
  maxResponseBytes: number;
  /** Who may read the schema (introspection) and see field suggestions. */
  introspection: IntrospectionMode;
  /** Serve GraphiQL at /graphiql. */
  graphiql: boolean;
  /** When set, /metrics needs `Authorization: Bearer <this>`. */
  metricsToken: string | undefined;
  /**
   * When set (PLANFENCE_METRICS_LISTEN, `host:port`), /metrics is served only on this
   * address, by a server of its own, and the main port answers 404 for it.
   */
  metricsListen: { host: string; port: number } | null;
  /** Longest string value in a log line; longer ones are cut. */
  maxLogFieldChars: number;
}

export interface HttpConfig {
  /** Whole request, body included (slow bodies end here). */
  requestTimeoutMs: number;
  /** Until the request headers are complete (also a new connection that sends nothing). */
  headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  bodyLimit: number;
  /** Open connections at once; further ones are dropped on accept. */
  maxConnections: number;
  /** Open connections at once from one client address; further ones are dropped on accept. */
  maxConnectionsPerAddress: number;
  /** SIGTERM/SIGINT: in-flight requests get this long, then every connection is closed. */
  shutdownTimeoutMs: number;
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) {
    throw new ConfigError(name, `must be an integer between ${min} and ${max} (got "${raw}")`);
  }
  const value = Number(raw.trim());
  if (value < min || value > max) {
    throw new ConfigError(name, `must be between ${min} and ${max} (got ${value})`);
  }
  return value;
}

function database(env: Env): DatabaseConfig {
  const url = env.DATABASE_URL || 'sqlite:./data/planfence.db';
  const syncRaw = (env.PLANFENCE_SQLITE_SYNCHRONOUS || 'FULL').toUpperCase();
  if (syncRaw !== 'FULL' && syncRaw !== 'NORMAL') {
    throw new ConfigError(
      'PLANFENCE_SQLITE_SYNCHRONOUS',
      `must be FULL or NORMAL (got "${env.PLANFENCE_SQLITE_SYNCHRONOUS}")`,
    );
  }
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    if (path === '')
      throw new ConfigError(
        'DATABASE_URL',
        'names no SQLite file (sqlite:PATH or sqlite::memory:)',
      );
    return {
      kind: 'sqlite',
      path: path === ':memory:' ? path : resolve(path),
      synchronous: syncRaw,
      cacheMiB: integer(env, 'PLANFENCE_SQLITE_CACHE_MIB', 8, 1, 1024),
      checkpointMs: integer(env, 'PLANFENCE_SQLITE_CHECKPOINT_MS', 20, 0, 60_000),
      writerThread: integer(env, 'PLANFENCE_SQLITE_WRITER_THREAD', 1, 0, 1) === 1,
    };
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    try {
      new URL(url);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
    return {
      kind: 'postgres',
      url,
      poolSize: integer(env, 'PLANFENCE_PG_POOL_SIZE', 10, 1, 1000),
      decisionsPerEnvironment: integer(env, 'PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT', 2, 1, 1000),
    };
  }
  throw new ConfigError('DATABASE_URL', `must start with sqlite: or postgres:// (got "${url}")`);
}

function quotas(env: Env, maxPlanBytes: number): QuotaConfig {
  const planBytesPerHour = integer(
    env,
    'PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR',
    100 * maxPlanBytes,
    1,
    Number.MAX_SAFE_INTEGER,
  );
  if (planBytesPerHour < maxPlanBytes) {
    throw new ConfigError(
      'PLANFENCE_QUOTA_PLAN_BYTES_PER_HOUR',
      `must be at least PLANFENCE_MAX_PLAN_BYTES (${maxPlanBytes}), or no plan of the largest size could ever be submitted (got ${planBytesPerHour})`,
    );
  }
  return {
    requestsPerSecond: integer(env, 'PLANFENCE_RATE_REQUESTS_PER_SECOND', 500, 1, 1_000_000),
    requestBurst: integer(env, 'PLANFENCE_RATE_REQUESTS_BURST', 5000, 1, 10_000_000),
    writesPerSecond: integer(env, 'PLANFENCE_RATE_WRITES_PER_SECOND', 100, 1, 1_000_000),
    writeBurst: integer(env, 'PLANFENCE_RATE_WRITES_BURST', 2000, 1, 10_000_000),
    leasesPerMinute: integer(env, 'PLANFENCE_RATE_LEASES_PER_MINUTE', 600, 1, 1_000_000),
    planBytesPerHour,
    auditRefusalsPerMinute: integer(env, 'PLANFENCE_AUDIT_REFUSALS_PER_MINUTE', 60, 1, 1_000_000),
  };
}

function flag(env: Env, name: string): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(name, `must be 1 or 0 (got "${env[name]}")`);
}

/**
 * What the largest write a client may make needs on disk: a submit's content and its
 * summary (each up to PLANFENCE_MAX_PLAN_BYTES) and its plan file (base64), written twice
 * (SQLite's WAL, then the database file at the checkpoint), and 1 MiB for pages and indexes.
 */
export function largestWriteBytes(maxPlanBytes: number, maxArtifactBytes: number): number {
  const stored = 2 * maxPlanBytes + Math.ceil(maxArtifactBytes / 3) * 4;
  return 2 * stored + 1024 * 1024;
}

function storage(env: Env): StorageConfig {
  return {
    initialize: flag(env, 'PLANFENCE_INIT_DATABASE'),
    checkIntervalMs: integer(env, 'PLANFENCE_STORAGE_CHECK_MS', 1000, 50, 60_000),
    writeFailureMs: integer(env, 'PLANFENCE_HEALTH_WRITE_FAILURE_SECONDS', 60, 1, 86_400) * 1000,
  };
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = raw.trim().toLowerCase() as T;
  if (!allowed.includes(value)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')} (got "${raw}")`);
  }
  return value;
}

/** `host:port` (`[v6]:port` for IPv6; port 0: any free port), or null when unset. */
function listenAddress(env: Env, name: string): { host: string; port: number } | null {
  const raw = env[name]?.trim();
  if (!raw) return null;
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(raw);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) {
    throw new ConfigError(
      name,
      `must be host:port, e.g. 127.0.0.1:9464 or [::1]:9464 (got "${raw}")`,
    );
  }
  return { host: match[1] ?? match[2], port };
}

function limits(env: Env): LimitsConfig {
  const metricsToken = env.PLANFENCE_METRICS_TOKEN;
  if (metricsToken !== undefined && metricsToken !== '' && metricsToken.length < 16) {
    throw new ConfigError('PLANFENCE_METRICS_TOKEN', 'must be at least 16 characters');
  }
  return {
    maxQueryBytes: integer(env, 'PLANFENCE_MAX_QUERY_BYTES', 64 * 1024, 1024, 16 * 1024 * 1024),
    maxTokens: integer(env, 'PLANFENCE_MAX_QUERY_TOKENS', 20_000, 100, 10_000_000),
    maxRootFields: integer(env, 'PLANFENCE_MAX_ROOT_FIELDS', 32, 1, 10_000),
    maxFields: integer(env, 'PLANFENCE_MAX_QUERY_FIELDS', 1000, 1, 1_000_000),
    maxDepth: integer(env, 'PLANFENCE_MAX_QUERY_DEPTH', 20, 2, 1000),
    maxCost: integer(env, 'PLANFENCE_MAX_QUERY_COST', 600_000, 1, 1_000_000_000),
    heavyQueryCost: integer(env, 'PLANFENCE_HEAVY_QUERY_COST', 100_000, 1, 1_000_000_000),
    maxHeavyQueries: integer(env, 'PLANFENCE_MAX_HEAVY_QUERIES', 2, 1, 1000),
    heavyQueryWaitMs: integer(env, 'PLANFENCE_HEAVY_QUERY_WAIT_SECONDS', 10, 1, 3600) * 1000,
    maxResponseBytes: integer(
      env,
      'PLANFENCE_MAX_RESPONSE_BYTES',
      128 * 1024 * 1024,
      1024,
      256 * 1024 * 1024,
    ),
    introspection: oneOf(env, 'PLANFENCE_INTROSPECTION', 'authenticated', [
      'authenticated',
      'open',
      'off',
    ] as const),
    graphiql: oneOf(env, 'PLANFENCE_GRAPHIQL', 'off', ['on', 'off'] as const) === 'on',
    metricsToken: metricsToken || undefined,
    metricsListen: listenAddress(env, 'PLANFENCE_METRICS_LISTEN'),
    maxLogFieldChars: integer(env, 'PLANFENCE_LOG_FIELD_MAX_CHARS', 200, 16, 100_000),
  };
}

function http(env: Env, maxPlanBytes: number, maxArtifactBytes: number): HttpConfig {
  // A plan's JSON encoding can be larger than its UTF-8 bytes (escapes), and an artifact
  // travels as base64; leave room, the service enforces both limits.
  const defaultBody = maxPlanBytes * 6 + Math.ceil(maxArtifactBytes / 3) * 4 + 64 * 1024;
  const requestTimeoutMs =
    integer(env, 'PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600) * 1000;
  const headersTimeoutMs =
    integer(env, 'PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS', 10, 1, 3600) * 1000;
  // Node refuses a server whose headers may take longer than the whole request.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      'PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS',
      `(${headersTimeoutMs / 1000}) must not exceed PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS (${requestTimeoutMs / 1000})`,
    );
  }
  return {
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: integer(env, 'PLANFENCE_HTTP_KEEP_ALIVE_SECONDS', 5, 1, 3600) * 1000,
    bodyLimit: integer(env, 'PLANFENCE_MAX_BODY_BYTES', defaultBody, 1024, 1024 * 1024 * 1024),
    maxConnections: integer(env, 'PLANFENCE_MAX_CONNECTIONS', 1024, 1, 1_000_000),
    maxConnectionsPerAddress: integer(env, 'PLANFENCE_MAX_CONNECTIONS_PER_IP', 256, 1, 1_000_000),
    shutdownTimeoutMs: integer(env, 'PLANFENCE_SHUTDOWN_TIMEOUT_SECONDS', 10, 1, 3600) * 1000,
  };
}

/** Reads and validates the whole configuration once, at start. */
export function loadConfig(env: Env = process.env): Config {
  const db = database(env);
  const adminToken = env.PLANFENCE_ADMIN_TOKEN;
  if (adminToken !== undefined && adminToken !== '' && adminToken.length < 16) {
    throw new ConfigError('PLANFENCE_ADMIN_TOKEN', 'must be at least 16 characters');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(
      'LOG_LEVEL',
      `must be fatal, error, warn, info, debug, trace or silent (got "${logLevel}")`,
    );
  }
  const logFormat = (env.PLANFENCE_LOG_FORMAT || 'auto') as LogFormat;
  if (!['auto', 'json', 'pretty'].includes(logFormat)) {
    throw new ConfigError(
      'PLANFENCE_LOG_FORMAT',
      `must be auto, json or pretty (got "${logFormat}")`,
    );
  }
  const maxPlanBytes = integer(env, 'PLANFENCE_MAX_PLAN_BYTES', 1024 * 1024, 1, 64 * 1024 * 1024);
  const maxArtifactBytes = integer(
    env,
    'PLANFENCE_MAX_ARTIFACT_BYTES',
    4 * 1024 * 1024,
    1,
    256 * 1024 * 1024,
  );
  const dataDir =
    db.kind === 'sqlite' && db.path !== ':memory:' ? dirname(db.path) : resolve('data');
  return {
    port: integer(env, 'PORT', 4000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    database: db,
    adminToken: adminToken || undefined,
    adminTokenFile: resolve(env.PLANFENCE_ADMIN_TOKEN_FILE || `${dataDir}/admin-token`),
    maxPlanBytes,
    maxArtifactBytes,
    idempotencyTtlMs: integer(env, 'PLANFENCE_IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 365) * 3600_000,
    planRetentionMs: integer(env, 'PLANFENCE_PLAN_RETENTION_DAYS', 30, 1, 36500) * 86400_000,
    retentionIntervalMs:
      integer(env, 'PLANFENCE_RETENTION_INTERVAL_SECONDS', 3600, 1, 7 * 86400) * 1000,
    logLevel,
    logFormat,
    quotas: quotas(env, maxPlanBytes),
    sockets: socketLimits(env),
    storage: storage(env),
    minFreeBytes: integer(
      env,
      'PLANFENCE_STORAGE_MIN_FREE_BYTES',
      largestWriteBytes(maxPlanBytes, maxArtifactBytes),
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    limits: limits(env),
    http: http(env, maxPlanBytes, maxArtifactBytes),
    identity: identity(env),
    slack: readSlackConfig(env),
    webhooks: webhooks(env),
    subscriptions: {
      replayLimit: integer(env, 'PLANFENCE_SUBSCRIPTION_REPLAY_LIMIT', 1000, 1, 100_000),
      replayEventsPerMinute: integer(
        env,
        'PLANFENCE_WS_REPLAY_EVENTS_PER_MINUTE',
        20_000,
        1,
        100_000_000,
      ),
      maxReplaysPerPrincipal: integer(env, 'PLANFENCE_WS_MAX_REPLAYS_PER_PRINCIPAL', 4, 1, 10_000),
      replayBytesPerMinute: integer(
        env,
        'PLANFENCE_WS_REPLAY_BYTES_PER_MINUTE',
        128 * 1024 * 1024,
        1024,
        Number.MAX_SAFE_INTEGER,
      ),
    },
    policies: {
      policyBudgetMs: integer(env, 'PLANFENCE_POLICY_BUDGET_MS', 50, 1, 60_000),
      planBudgetMs: integer(env, 'PLANFENCE_PLAN_POLICY_BUDGET_MS', 250, 1, 600_000),
      parseBudgetMs: integer(env, 'PLANFENCE_POLICY_PARSE_BUDGET_MS', 1000, 1, 60_000),
      terraformBudgetMs: integer(env, 'PLANFENCE_TERRAFORM_PARSE_BUDGET_MS', 1000, 1, 60_000),
      workers: integer(env, 'PLANFENCE_POLICY_WORKERS', 1, 1, 64),
    },
    mcp: mcp(env),
  };
}

function list(env: Env, name: string): string[] | null {
  const raw = env[name]?.trim();
  if (!raw) return null;
  return raw
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

function mcp(env: Env): McpConfig {
  const raw = env.PLANFENCE_PUBLIC_URL?.trim();
  let publicUrl: string | null = null;
  if (raw) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError('PLANFENCE_PUBLIC_URL', `must be an http(s) URL (got "${raw}")`);
    }
    if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash)
      throw new ConfigError('PLANFENCE_PUBLIC_URL', `must be an http(s) URL (got "${raw}")`);
    publicUrl = url.href.replace(/\/+$/, '');
  }
  return {
    publicUrl,
    allowedHosts: list(env, 'PLANFENCE_MCP_ALLOWED_HOSTS'),
    allowedOrigins: list(env, 'PLANFENCE_MCP_ALLOWED_ORIGINS'),
  };
}

function webhooks(env: Env): WebhooksConfig {
  return {
    maxAttempts: integer(env, 'PLANFENCE_WEBHOOK_MAX_ATTEMPTS', 12, 1, 1000),
    maxAgeMs: integer(env, 'PLANFENCE_WEBHOOK_MAX_AGE_SECONDS', 86400, 1, 30 * 86400) * 1000,
    timeoutMs: integer(env, 'PLANFENCE_WEBHOOK_TIMEOUT_MS', 5000, 100, 300_000),
    claimMarginMs: integer(env, 'PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS', 15_000, 1000, 600_000),
    concurrency: integer(env, 'PLANFENCE_WEBHOOK_CONCURRENCY', 8, 1, 256),
    slowAfterMs: integer(env, 'PLANFENCE_WEBHOOK_SLOW_AFTER_MS', 2000, 10, 300_000),
    backoffBaseMs: integer(env, 'PLANFENCE_WEBHOOK_BACKOFF_BASE_MS', 1000, 1, 3_600_000),
    backoffMaxMs: integer(env, 'PLANFENCE_WEBHOOK_BACKOFF_MAX_MS', 300_000, 1, 86_400_000),
    pollMs: integer(env, 'PLANFENCE_WEBHOOK_POLL_MS', 1000, 10, 3_600_000),
  };
}

function identity(env: Env): IdentityConfig {
  const path = env.PLANFENCE_OIDC_CONFIG;
  let oidc: OidcConfig | null = null;
  if (path) {
    try {
      oidc = readOidcConfig(path);
    } catch (error) {
      if (!(error instanceof OidcConfigProblem)) throw error;
      throw new ConfigError('PLANFENCE_OIDC_CONFIG', error.message);
    }
  }
  return {
    oidc,
    jwksTimeoutMs: integer(env, 'PLANFENCE_OIDC_JWKS_TIMEOUT_MS', 5000, 100, 60_000),
    jwksCooldownMs: integer(env, 'PLANFENCE_OIDC_JWKS_COOLDOWN_SECONDS', 30, 0, 3600) * 1000,
    fetchFailureCacheMs: integer(env, 'PLANFENCE_OIDC_FAILURE_CACHE_SECONDS', 10, 0, 3600) * 1000,
    exchangesPerMinute: integer(env, 'PLANFENCE_OIDC_EXCHANGES_PER_MINUTE', 60, 1, 1_000_000),
    clockToleranceSeconds: integer(env, 'PLANFENCE_OIDC_CLOCK_TOLERANCE_SECONDS', 5, 0, 300),
    maxTokenSeconds: integer(env, 'PLANFENCE_OIDC_MAX_TOKEN_SECONDS', 3600, 60, 3600),
  };
}

function socketLimits(env: Env): SocketLimits {
  return {
    initTimeoutMs: integer(env, 'PLANFENCE_WS_INIT_TIMEOUT_SECONDS', 5, 1, 300) * 1000,
    maxSubscriptionsPerSocket: integer(
      env,
      'PLANFENCE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET',
      100,
      1,
      100_000,
    ),
    maxSocketsPerPrincipal: integer(env, 'PLANFENCE_WS_MAX_SOCKETS_PER_PRINCIPAL', 20, 1, 100_000),
    maxSubscriptionFields: integer(env, 'PLANFENCE_WS_MAX_SUBSCRIPTION_FIELDS', 200, 1, 100_000),
    recheckIntervalMs: integer(env, 'PLANFENCE_WS_RECHECK_SECONDS', 30, 1, 86400) * 1000,
  };
}

/**
 * The configuration of an operator command (backup, restore): the environment's, with
 * `--database` in place of DATABASE_URL. A bad value is printed as `<command>: invalid
 * configuration: ...` and yields null (the command exits 2).
 */
export function loadCommandConfig(command: string, database: string | undefined): Config | null {
  try {
    return loadConfig({ ...process.env, ...(database ? { DATABASE_URL: database } : {}) });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`${command}: invalid configuration: ${error.message}`);
    return null;
  }
}
