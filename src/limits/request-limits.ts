import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  type DocumentNode,
  getOperationAST,
  GraphQLError,
  type GraphQLSchema,
  OperationTypeNode,
} from 'graphql';
import type { Registry } from 'prom-client';
import { authenticateOnce } from '../auth/authenticate.js';
import { AuthError } from '../auth/auth.errors.js';
import type { AuthService } from '../auth/auth.service.js';
import type { RequestWithPrincipal } from '../auth/roles.decorator.js';
import { InputError } from '../common/errors.js';
import type { LoggedRequest } from '../common/logging.js';
import type { Config } from '../config/config.js';
import {
  checkCost,
  checkDocumentShape,
  checkDocumentText,
  estimateCost,
} from './document-limits.js';
import { HeavyQueryGate } from './heavy-queries.js';
import { RequestLimitError } from '../common/limit.errors.js';
import { authentications, refusedRequests } from './limit-metrics.js';
import { jsonBytesOver } from './response-bytes.js';

interface HeavyRequest {
  /** Set while an expensive request holds a slot of the HeavyQueryGate. */
  releaseHeavySlot?: () => void;
}

/** The slice of the Mercurius context the hooks read. */
interface HookContext {
  req?: RequestWithPrincipal;
  reply?: { request: FastifyRequest & HeavyRequest; code(status: number): unknown };
  /** A subscription's cost per event, for the feeds to price a replay with (feeds.ts). */
  eventCost?: number;
}

interface MercuriusHooks {
  addHook(
    name: 'preParsing',
    hook: (schema: GraphQLSchema, source: string, context: HookContext) => Promise<void>,
  ): void;
  addHook(
    name: 'preValidation',
    hook: (schema: GraphQLSchema, document: DocumentNode, context: HookContext) => Promise<void>,
  ): void;
  addHook(
    name: 'preSubscriptionParsing',
    hook: (schema: GraphQLSchema, source: string, context: HookContext) => Promise<void>,
  ): void;
  addHook(
    name: 'preSubscriptionExecution',
    hook: (schema: GraphQLSchema, document: DocumentNode, context: HookContext) => Promise<void>,
  ): void;
  addHook(
    name: 'onResolution',
    hook: (execution: { data?: unknown; errors?: unknown }, context: HookContext) => Promise<void>,
  ): void;
  addHook(
    name: 'preExecution',
    hook: (
      schema: GraphQLSchema,
      document: DocumentNode,
      context: HookContext,
      variables: Record<string, unknown> | undefined,
    ) => Promise<void>,
  ): void;
}

function requestOf(context: HookContext): RequestWithPrincipal | undefined {
  return context.req ?? context.reply?.request;
}

function operationNameOf(context: HookContext): string | undefined {
  const request = context.reply?.request;
  const from = (request?.body ?? request?.query) as { operationName?: unknown } | undefined;
  return typeof from?.operationName === 'string' ? from.operationName : undefined;
}

/**
 * The GraphQL request limits, in the order a request meets them, each before any resolver
 * runs (docs/limits.md):
 * - preParsing: document bytes and bracket nesting (one pass over the text); with
 *   introspection `authenticated`, a request that carries a token is authenticated here,
 *   once, so that errors know whether to show field suggestions;
 * - preValidation: root fields, fields and depth, fragments expanded (graphql-js
 *   validation, whose cost grows with these, runs only on what passed);
 * - preExecution (every request, cached documents too): introspection per the
 *   configured mode, the cost estimate with this request's variables, and for an
 *   expensive request a slot among the few that may execute at once.
 */
export function installRequestLimits(
  fastify: FastifyInstance,
  config: Config,
  auth: AuthService,
  registry: Registry,
  heavy: HeavyQueryGate,
  /** The rows a list without a page size would return (`Query.environments`), or undefined. */
  countRows: (list: string) => Promise<number | undefined> = () => Promise.resolve(undefined),
): void {
  const { limits } = config;
  const refused = refusedRequests(registry);
  const lookups = authentications(registry);
  const contentWeight = Math.ceil(config.maxPlanBytes / 1024);
  const artifactWeight = Math.ceil((Math.ceil(config.maxArtifactBytes / 3) * 4) / 1024);
  const graphql = (fastify as unknown as { graphql: MercuriusHooks }).graphql;
  const counted = <T>(check: () => T): T => {
    try {
      return check();
    } catch (error) {
      if (error instanceof RequestLimitError) refused.inc({ limit: error.limit });
      throw error;
    }
  };

  graphql.addHook('preParsing', async (_schema, source, context) => {
    counted(() => checkDocumentText(source, limits));
    const req = requestOf(context);
    if (limits.introspection === 'authenticated' && req?.headers.authorization) {
      // A principal from memory will do here: an operation that needs the row reads it.
      await authenticateOnce(auth, req, lookups, true).catch(() => undefined);
    }
  });

  graphql.addHook('preValidation', async (_schema, document) => {
    counted(() => checkDocumentShape(document, limits));
    return Promise.resolve();
  });

  // Subscriptions over WebSocket: Mercurius parses those before any hook; the shape limits
  // still come before graphql-js validates and subscribes.
  graphql.addHook('preSubscriptionParsing', async (_schema, source) => {
    counted(() => checkDocumentText(source, limits));
    return Promise.resolve();
  });
  // A subscription is priced per event like a query; a replay (`after`) costs that times
  // the events it replays, which the feed counts before reading them (feeds.ts).
  graphql.addHook('preSubscriptionExecution', async (schema, document, context) => {
    counted(() => checkDocumentShape(document, limits));
    const { cost } = estimateCost({ schema, document, contentWeight, artifactWeight });
    counted(() => checkCost(cost, limits));
    context.eventCost = cost;
    return Promise.resolve();
  });

  graphql.addHook('preExecution', async (schema, document, context, variables) => {
    // graphql-js would run a subscription sent over HTTP as a query, with no events to give.
    if (
      getOperationAST(document, operationNameOf(context))?.operation ===
      OperationTypeNode.SUBSCRIPTION
    ) {
      throw new InputError(
        'BAD_USER_INPUT',
        'subscriptions are served over WebSocket (graphql-transport-ws) at /graphql, not over HTTP',
      );
    }
    const input = {
      schema,
      document,
      variables,
      operationName: operationNameOf(context),
      contentWeight,
      artifactWeight,
    };
    const first = estimateCost(input);
    const { introspection, unpaged } = first;
    let cost = first.cost;
    // A list without a page size is priced again with the rows it would really return.
    if (unpaged.size) {
      const unpagedSizes: Record<string, number> = {};
      for (const list of unpaged) {
        const rows = await countRows(list);
        if (rows !== undefined) unpagedSizes[list] = rows;
      }
      if (Object.keys(unpagedSizes).length) ({ cost } = estimateCost({ ...input, unpagedSizes }));
    }
    if (introspection && limits.introspection !== 'open') {
      if (limits.introspection === 'off') {
        throw new AuthError('FORBIDDEN', 'introspection is disabled (PLANFENCE_INTROSPECTION=off)');
      }
      const req = requestOf(context);
      if (!req) throw new AuthError('UNAUTHENTICATED', 'introspection needs a valid token');
      await authenticateOnce(auth, req, lookups);
    }
    counted(() => checkCost(cost, limits));
    const request = context.reply?.request;
    if (cost >= limits.heavyQueryCost && request && !request.releaseHeavySlot) {
      request.releaseHeavySlot = await heavy.acquire();
    }
  });

  // The result priced by the bytes its JSON will take, escaping included (a control
  // character grows 6×), before the response text is built: a result over
  // PLANFENCE_MAX_RESPONSE_BYTES is refused with a code instead of failing to serialize.
  graphql.addHook('onResolution', async (execution, context) => {
    if (execution.data == null || !jsonBytesOver(execution.data, limits.maxResponseBytes)) return;
    const error = new RequestLimitError(
      'responseBytes',
      limits.maxResponseBytes,
      `the response would have more than ${limits.maxResponseBytes} bytes of JSON, escaping included (PLANFENCE_MAX_RESPONSE_BYTES); ask for fewer items or fields`,
    );
    refused.inc({ limit: error.limit });
    execution.data = null;
    execution.errors = [new GraphQLError(error.message, { extensions: error.extensions })];
    if (context.reply) {
      context.reply.code(400);
      (context.reply.request as unknown as LoggedRequest).outcome = 'BAD_USER_INPUT';
    }
    return Promise.resolve();
  });
}

/**
 * The gate that expensive GraphQL requests pass (see installRequestLimits); the slot is
 * given back when the answer is sent or the client goes away.
 */
export function heavyQueryGate(fastify: FastifyInstance, config: Config): HeavyQueryGate {
  const gate = new HeavyQueryGate(config.limits.maxHeavyQueries, config.limits.heavyQueryWaitMs);
  const release = (request: FastifyRequest, _reply: unknown, done: () => void) => {
    (request as FastifyRequest & HeavyRequest).releaseHeavySlot?.();
    done();
  };
  fastify.addHook('onResponse', release);
  fastify.addHook('onRequestAbort', (request, done) => release(request, null, done));
  return gate;
}

/**
 * The last line behind the cost estimate: a GraphQL response whose serialized form is
 * larger than PLANFENCE_MAX_RESPONSE_BYTES is replaced by a coded error (400).
 */
export function limitResponseSize(fastify: FastifyInstance, config: Config): void {
  const max = config.limits.maxResponseBytes;
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (
      typeof payload !== 'string' ||
      payload.length * 3 <= max ||
      !request.url.startsWith('/graphql') ||
      Buffer.byteLength(payload) <= max
    ) {
      done(null, payload);
      return;
    }
    (request as FastifyRequest & LoggedRequest).outcome = 'BAD_USER_INPUT';
    const error = new RequestLimitError(
      'responseBytes',
      max,
      `the response would have more than ${max} bytes (PLANFENCE_MAX_RESPONSE_BYTES); ask for fewer items or fields`,
    );
    void reply.code(400).header('content-type', 'application/json; charset=utf-8');
    done(
      null,
      JSON.stringify({
        data: null,
        errors: [{ message: error.message, extensions: error.extensions }],
      }),
    );
  });
}
