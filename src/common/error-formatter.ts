import { type ArgumentsHost, Catch, Logger } from '@nestjs/common';
import type { GqlExceptionFilter } from '@nestjs/graphql';
import { GraphQLError, type ExecutionResult } from 'graphql';
import { type ErrorCode, extensionsOf, isDomainError } from './errors.js';
import { RequestLimitError } from './limit.errors.js';
import { truncate, type LoggedRequest } from './logging.js';

const logger = new Logger('GraphQL');

/** Errors raised by the HTTP layer before GraphQL runs (body parsing, size limit). */
function transportCode(error: { code?: unknown; statusCode?: unknown }): ErrorCode | null {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413)
    return 'PAYLOAD_TOO_LARGE';
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return 'BAD_USER_INPUT';
  }
  return null;
}

interface Formatted {
  error: GraphQLError;
  status: number;
}

/** A parser or engine that ran out of stack: the client's document or input nests too deeply. */
function isTooDeep(error: unknown): boolean {
  return error instanceof Error && /maximum call stack/i.test(error.message);
}

const TOO_DEEP = 'the query or its variables nest too deeply';

/** Mercurius's "Unknown query": the request carried no query it could read. */
const NO_QUERY =
  'no GraphQL query in the request: POST a JSON body {"query": "...", "variables": {...}} with content-type: application/json';

/** A body of a type the service does not read (a form, say): JSON only. */
const UNSUPPORTED_MEDIA_TYPE =
  'this content-type is not accepted: POST a JSON body {"query": "...", "variables": {...}} with content-type: application/json';

/** graphql-js's parser stopping at `parseOptions.maxTokens` ("more that", sic, in v16). */
const TOO_MANY_TOKENS = /Document contains more th[a-z]+ (\d+) tokens/;

function format(error: GraphQLError): Formatted[] {
  const original: (Error & { errors?: unknown; code?: unknown; statusCode?: unknown }) | undefined =
    error.originalError;
  const at = {
    nodes: error.nodes,
    positions: error.positions,
    path: error.path,
    source: error.source,
  };
  if (original instanceof RequestLimitError) {
    // Refused before execution: nothing ran, the request as a whole is the mistake.
    return [
      {
        error: new GraphQLError(original.message, { extensions: original.extensions }),
        status: 400,
      },
    ];
  }
  if (isDomainError(original)) {
    // BAD_USER_INPUT outside any field (no path) was raised before execution: a 400.
    const status =
      original.code === 'PAYLOAD_TOO_LARGE'
        ? 413
        : original.code === 'BAD_USER_INPUT' && !error.path
          ? 400
          : 200;
    return [
      {
        error: new GraphQLError(original.message, { ...at, extensions: extensionsOf(original) }),
        status,
      },
    ];
  }
  if (isTooDeep(original) || isTooDeep(error)) {
    return [
      {
        error: new GraphQLError(TOO_DEEP, { extensions: { code: 'BAD_USER_INPUT' } }),
        status: 400,
      },
    ];
  }
  if (original && Array.isArray(original.errors)) {
    // Mercurius wraps query validation errors: each is the client's mistake.
    return (original.errors as GraphQLError[])
      .flatMap((inner) =>
        format(
          inner instanceof GraphQLError
            ? inner
            : new GraphQLError(String((inner as Error).message ?? inner)),
        ),
      )
      .map(({ error: e }) => ({ error: e, status: 400 }));
  }
  const tokens = TOO_MANY_TOKENS.exec(error.message);
  if (tokens) {
    const max = Number(tokens[1]);
    return [
      {
        error: new GraphQLError(
          `the query document has more than ${max} tokens (PLANFENCE_MAX_QUERY_TOKENS)`,
          { extensions: { code: 'BAD_USER_INPUT', limit: 'tokens', max } },
        ),
        status: 400,
      },
    ];
  }
  if (!original || original instanceof GraphQLError) {
    // Parse errors, unknown fields, wrong argument types: graphql-js reports them without a cause.
    return [
      {
        error: new GraphQLError(error.message, { ...at, extensions: { code: 'BAD_USER_INPUT' } }),
        status: 400,
      },
    ];
  }
  const transport = transportCode(original);
  if (transport) {
    const unsupported = original.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE';
    const message =
      transport === 'PAYLOAD_TOO_LARGE'
        ? 'request body too large'
        : original.code === 'MER_ERR_GQL_PERSISTED_QUERY_NOT_FOUND'
          ? NO_QUERY
          : unsupported
            ? UNSUPPORTED_MEDIA_TYPE
            : original.message;
    return [
      {
        error: new GraphQLError(message, { extensions: { code: transport } }),
        status: transport === 'PAYLOAD_TOO_LARGE' ? 413 : unsupported ? 415 : 400,
      },
    ];
  }
  logger.error(`unexpected error: ${truncate(original.message, 1000)}`, original.stack);
  return [
    {
      error: new GraphQLError('internal error', { ...at, extensions: { code: 'INTERNAL' } }),
      status: 500,
    },
  ];
}

/** Longest error message a client gets. */
const MAX_MESSAGE_CHARS = 1000;

/** graphql-js's "Did you mean ...?" hints, which spell out the schema. */
const SUGGESTION = / ?Did you mean [^?]*\?/g;

export interface ErrorFormatterOptions {
  /** Keep field suggestions in messages for callers without a valid token. */
  suggestionsWithoutToken: boolean;
}

/**
 * The one place where errors become GraphQL errors (Mercurius `errorFormatter`).
 * Domain errors keep their code and details; graphql-js validation errors and requests
 * over a limit are BAD_USER_INPUT (400); anything unexpected is logged here and reaches
 * the client as INTERNAL, without message, stack or SQL. Field suggestions reach only
 * callers with a valid token, unless configured otherwise.
 */
export function createErrorFormatter(options: ErrorFormatterOptions) {
  return (
    execution: ExecutionResult & { errors: readonly GraphQLError[] },
    context?: { reply?: { request?: LoggedRequest } },
  ) => formatGraphQLErrors(execution, context, options);
}

export function formatGraphQLErrors(
  execution: ExecutionResult & { errors: readonly GraphQLError[] },
  context?: { reply?: { request?: LoggedRequest } },
  options: ErrorFormatterOptions = { suggestionsWithoutToken: false },
): {
  statusCode: number;
  response: ExecutionResult;
} {
  const request = context?.reply?.request;
  const hide = !options.suggestionsWithoutToken && !request?.principal;
  const formatted = execution.errors.flatMap(format).map((f) => {
    let message = f.error.message;
    if (hide && message.includes('Did you mean')) message = message.replace(SUGGESTION, '');
    // graphql-js quotes client text (an operation name, an argument) in its messages: never echo megabytes back.
    if (message.length > MAX_MESSAGE_CHARS) message = truncate(message, MAX_MESSAGE_CHARS);
    if (message === f.error.message) return f;
    return {
      ...f,
      error: new GraphQLError(message, {
        nodes: f.error.nodes,
        source: f.error.source,
        positions: f.error.positions,
        path: f.error.path,
        extensions: f.error.extensions,
      }),
    };
  });
  if (request)
    request.outcome = [...new Set(formatted.map((f) => String(f.error.extensions.code)))].join(',');
  const statusCode = execution.data
    ? 200
    : Math.max(200, ...formatted.map((f) => f.status).filter((s) => s !== 200));
  return {
    statusCode: formatted.every((f) => f.status === 200) ? 200 : statusCode,
    response: { data: execution.data ?? null, errors: formatted.map((f) => f.error) },
  };
}

/**
 * Resolvers' exceptions go to `formatGraphQLErrors` untouched; this filter only keeps
 * Nest from logging every client rejection as a server error.
 */
@Catch()
export class PassThroughGqlFilter implements GqlExceptionFilter {
  catch(exception: unknown, _host: ArgumentsHost): unknown {
    return exception;
  }
}
