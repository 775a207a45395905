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

/** The operation of a GraphQL body: its operationName, else its first root field. */
function operationOf(request: FastifyRequest): string | undefined {
  const body = request.body as { operationName?: string; query?: string } | undefined;
  if (!body || typeof body !== 'object') return undefined;
  if (body.operationName) return body.operationName;
  return typeof body.query === 'string' ? ROOT_FIELD.exec(body.query)?.[1] : undefined;
}

/**
 * One JSON line per request: request id, principal, operation, outcome code, status,
 * duration. Never a token, never plan content.
 */
export function logRequests(fastify: FastifyInstance, logger: Logger): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    const logged = request as FastifyRequest & LoggedRequest;
    logger.info(
      {
        requestId: request.id,
        method: request.method,
        path: request.routeOptions.url ?? request.url,
        principal: logged.principal?.name,
        operation: operationOf(request),
        outcome: logged.outcome ?? (reply.statusCode < 400 ? 'OK' : `HTTP_${reply.statusCode}`),
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    );
    done();
  });
}
