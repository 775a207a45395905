import type { LoggerService } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';

/** Nest's own messages (start-up, errors) as JSON lines through the same pino logger. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly pino: Logger) {}
  log(message: unknown, context?: string) {
    this.pino.info({ context }, String(message));
  }
  error(message: unknown, trace?: string, context?: string) {
    this.pino.error({ context, trace }, String(message));
  }
  warn(message: unknown, context?: string) {
    this.pino.warn({ context }, String(message));
  }
  debug(message: unknown, context?: string) {
    this.pino.debug({ context }, String(message));
  }
  verbose(message: unknown, context?: string) {
    this.pino.trace({ context }, String(message));
  }
  fatal(message: unknown, context?: string) {
    this.pino.fatal({ context }, String(message));
  }
}

/** What the request line reports; set by the auth guard and the error formatter. */
export interface LoggedRequest {
  principal?: { name: string };
  outcome?: string;
}

const ROOT_FIELD = /^\s*(?:(?:query|mutation|subscription)\b[^{]*)?\{\s*(\w+)/;

/** A client-supplied string as it may appear in a log line: at most `max` characters. */
export function truncate(value: string, max: number): string;
export function truncate(value: string | undefined, max: number): string | undefined;
export function truncate(value: string | undefined, max: number): string | undefined {
  if (value === undefined || value.length <= max) return value;
  return `${value.slice(0, max)}…(${value.length} chars)`;
}

/**
 * The operation of a GraphQL body: its operationName, else its first root field; of an MCP
 * message (POST /mcp): its method, and the tool it calls.
 */
function operationOf(request: FastifyRequest): string | undefined {
  const body = request.body as
    | { operationName?: unknown; query?: unknown; method?: unknown; params?: { name?: unknown } }
    | undefined;
  if (!body || typeof body !== 'object') return undefined;
  if (typeof body.method === 'string')
    return typeof body.params?.name === 'string'
      ? `${body.method} ${body.params.name}`
      : body.method;
  if (typeof body.operationName === 'string' && body.operationName) return body.operationName;
  // Only the start of the text: the regular expression must not scan a hostile document.
  return typeof body.query === 'string'
    ? ROOT_FIELD.exec(body.query.slice(0, 4096))?.[1]
    : undefined;
}

/**
 * One JSON line per request: request id, principal, operation, outcome code, status,
 * duration. Never a token, never plan content; every client-supplied string is cut to
 * `maxFieldChars` (PLANFENCE_LOG_FIELD_MAX_CHARS).
 */
export function logRequests(fastify: FastifyInstance, logger: Logger, maxFieldChars = 200): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    const logged = request as FastifyRequest & LoggedRequest;
    logger.info(
      {
        requestId: request.id,
        method: request.method,
        path: truncate(request.routeOptions.url ?? request.url, maxFieldChars),
        principal: truncate(logged.principal?.name, maxFieldChars),
        operation: truncate(operationOf(request), maxFieldChars),
        outcome: truncate(
          logged.outcome ?? (reply.statusCode < 400 ? 'OK' : `HTTP_${reply.statusCode}`),
          maxFieldChars,
        ),
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    );
    done();
  });
}
