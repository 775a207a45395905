import { type ArgumentsHost, Catch, Logger } from '@nestjs/common';
import type { GqlExceptionFilter } from '@nestjs/graphql';
import { GraphQLError, type ExecutionResult } from 'graphql';
import { type ErrorCode, extensionsOf, isDomainError } from './errors.js';
import type { LoggedRequest } from './logging.js';

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

function format(error: GraphQLError): Formatted[] {
  const original: (Error & { errors?: unknown; code?: unknown; statusCode?: unknown }) | undefined =
    error.originalError;
  const at = {
    nodes: error.nodes,
    positions: error.positions,
    path: error.path,
    source: error.source,
  };
  if (isDomainError(original)) {
    const status = original.code === 'PAYLOAD_TOO_LARGE' ? 413 : 200;
    return [
      {
        error: new GraphQLError(original.message, { ...at, extensions: extensionsOf(original) }),
        status,
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
    const message = transport === 'PAYLOAD_TOO_LARGE' ? 'request body too large' : original.message;
    return [
      {
        error: new GraphQLError(message, { extensions: { code: transport } }),
        status: transport === 'PAYLOAD_TOO_LARGE' ? 413 : 400,
      },
    ];
  }
  logger.error(`unexpected error: ${original.message}`, original.stack);
  return [
    {
      error: new GraphQLError('internal error', { ...at, extensions: { code: 'INTERNAL' } }),
      status: 500,
    },
  ];
}

/**
 * The one place where errors become GraphQL errors (Mercurius `errorFormatter`).
 * Domain errors keep their code and details; graphql-js validation errors are
 * BAD_USER_INPUT; anything unexpected is logged here and reaches the client as
 * INTERNAL, without message, stack or SQL.
 */
export function formatGraphQLErrors(
  execution: ExecutionResult & { errors: readonly GraphQLError[] },
  context?: { reply?: { request?: LoggedRequest } },
): {
  statusCode: number;
  response: ExecutionResult;
} {
  const formatted = execution.errors.flatMap(format);
  const request = context?.reply?.request;
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
