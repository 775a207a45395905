import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { createLogger, logRequest, logRequests, PinoNestLogger } from './common/logging.js';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';
import { AuthService } from './auth/auth.service.js';
import type { Clock } from './common/clock.js';
import { validationPipe } from './common/validation.js';
import { securityHeaders } from './common/security-headers.js';
import type { Config } from './config/config.js';
import {
  heavyQueryGate,
  installRequestLimits,
  limitResponseSize,
} from './limits/request-limits.js';
import { limitConnectionsPerAddress } from './limits/connection-limits.js';
import { largeJsonBodiesCounter, parseLargeJsonBodiesAside } from './limits/json-bodies.js';
import {
  collectSoonerForLargeBodies,
  largeRequestsGauges,
  readLargeBodiesInTurn,
} from './limits/large-bodies.js';
import { answerUnreadableMcpBodies } from './mcp/json-rpc.js';
import { MetricsService } from './metrics/metrics.service.js';
import { Database, select } from './database/database.js';

export interface AppOptions {
  /** Replaces the service clock (tests). */
  clock?: Clock;
  /** The JSON logger (default: info level to stdout). */
  logger?: Logger;
}

/**
 * The dashboard (/, /js/*.js modules, /dashboard.css) loads only its own files and talks to
 * /graphql over fetch and a same-origin WebSocket: no inline script, no other origin.
 */
const CONTENT_SECURITY_POLICY = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    objectSrc: ["'none'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
};

/**
 * Mercurius' GraphiQL (only with PLANFENCE_GRAPHIQL=on) loads React and GraphiQL from
 * unpkg.com; its pages get a policy that allows exactly that.
 */
const GRAPHIQL_POLICY =
  "default-src 'self'; script-src 'self' https://unpkg.com; style-src 'self' 'unsafe-inline' https://unpkg.com; " +
  "img-src 'self' data:; connect-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/** Builds the service: runs pending migrations, bootstraps the admin token, ready to `listen`. */
export async function createApp(
  config: Config,
  options: AppOptions = {},
): Promise<NestFastifyApplication> {
  const logger = options.logger ?? createLogger(config.logLevel, config.logFormat);
  const { http } = config;
  const adapter = new FastifyAdapter({
    bodyLimit: http.bodyLimit,
    genReqId: () => randomUUID(),
    // A request (headers and body) must be complete within requestTimeout; slow bodies end there.
    requestTimeout: http.requestTimeoutMs,
    keepAliveTimeout: http.keepAliveTimeoutMs,
    http: {
      headersTimeout: http.headersTimeoutMs,
      requestTimeout: http.requestTimeoutMs,
      // How often Node looks for requests over their timeouts (its default is 30 s).
      connectionsCheckingInterval: Math.min(1000, http.headersTimeoutMs),
    },
    // On close: idle keep-alive connections go at once, requests in flight are answered.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // A path that cannot be decoded (`/%ff`) is logged like every other request: Fastify
    // answers it before any hook runs. The answer keeps Fastify's own shape, its code
    // included (FST_ERR_BAD_URL).
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      reply.raw.once('finish', () =>
        logRequest(logger, request, reply, config.limits.maxLogFieldChars),
      );
      void reply
        .code(400)
        .send({ statusCode: 400, code: error.code, error: 'Bad Request', message: error.message });
    },
  });
  const fastify = adapter.getInstance();
  logRequests(fastify, logger, config.limits.maxLogFieldChars);
  answerUnreadableMcpBodies(fastify);
  securityHeaders(fastify, {
    contentSecurityPolicy: CONTENT_SECURITY_POLICY,
    // A same-origin WebSocket and fetch: nothing here needs cross-origin isolation headers.
    crossOriginEmbedderPolicy: false,
    frameguard: { action: 'deny' },
  });
  if (config.limits.graphiql) {
    fastify.addHook('onSend', (request, reply, payload, done) => {
      if (request.url.startsWith('/graphiql'))
        reply.header('content-security-policy', GRAPHIQL_POLICY);
      done(null, payload);
    });
  } else {
    // Off by default: say how to turn it on instead of a bare 404.
    fastify.get('/graphiql', (_request, reply) =>
      reply
        .code(404)
        .type('text/plain; charset=utf-8')
        .send('GraphiQL is off: start the service with PLANFENCE_GRAPHIQL=on to serve it here\n'),
    );
  }
  limitResponseSize(fastify, config);
  const largeJson = parseLargeJsonBodiesAside(fastify);
  const heapGrowth = collectSoonerForLargeBodies(fastify);
  const largeBodies = readLargeBodiesInTurn(fastify, http.requestTimeoutMs);
  const heavy = heavyQueryGate(fastify, config);
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(config, options.clock),
    adapter,
    {
      logger: new PinoNestLogger(logger),
      abortOnError: false,
      // JSON only: Nest would also parse form bodies, which run GraphQL as a browser form can
      // send them (a request no client of this service makes).
      bodyParser: false,
    },
  );
  app.useGlobalPipes(validationPipe);
  await app.init();
  const { registry } = app.get(MetricsService);
  installRequestLimits(
    fastify,
    config,
    app.get(AuthService),
    registry,
    heavy,
    unpagedRowCounter(app.get(Database)),
  );
  largeRequestsGauges(registry, heapGrowth, largeBodies);
  largeJsonBodiesCounter(registry, largeJson);
  app.getHttpServer().maxConnections = http.maxConnections;
  limitConnectionsPerAddress(app.getHttpServer(), http.maxConnectionsPerAddress);
  return app;
}

/** Tables whose rows an unpaged root list returns, by `Type.field`. */
const UNPAGED_TABLES: Record<string, string> = {
  'Query.environments': 'environments',
  'Query.principals': 'principals',
  'Query.webhooks': 'webhooks',
};

/** Counts the rows an unpaged root list would return (undefined for any other list). */
function unpagedRowCounter(db: Database): (list: string) => Promise<number | undefined> {
  return async (list) => {
    const table = UNPAGED_TABLES[list];
    if (!table) return undefined;
    // When the count cannot be read, the estimate stays 100 and the query meets the same failure.
    const rows = await db
      .read((m) => select<{ n: number | string }>(m, `SELECT COUNT(*) AS n FROM ${table}`))
      .catch(() => null);
    return rows ? Number(rows[0]?.n ?? 0) : undefined;
  };
}
