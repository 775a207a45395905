import type { LoggerService } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Logger, pino, stdTimeFunctions } from 'pino';
import type { LogFormat } from '../config/config.js';
import { stdoutLines } from './batched-lines.js';

/**
 * The service's logger: `json` lines with ISO times, or `pretty` lines for a person
 * (`2026-12-01 10:00:26.123Z INFO  message key=value`); `auto` is pretty on a terminal.
 */
export function createLogger(
  level: string,
  format: LogFormat,
  destination: { write(line: string): unknown; isTTY?: boolean } = process.stdout,
): Logger {
  const pretty = format === 'pretty' || (format === 'auto' && destination.isTTY === true);
  if (!pretty && destination === process.stdout) {
    destination = stdoutLines();
  }
  return pino(
    { level, base: { service: 'planfence' }, timestamp: stdTimeFunctions.isoTime },
    pretty ? prettyLines(destination) : destination,
  );
}

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
/** Fields every line has, or that the pretty line shows in its own place. */
const OWN_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg', 'context']);

/** A destination that turns pino's JSON lines into one readable line each. */
function prettyLines(out: { write(line: string): unknown }): { write(line: string): void } {
  return {
    write(line: string) {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const time = typeof entry.time === 'string' ? entry.time.replace('T', ' ') : '';
      const level = (LEVEL_NAMES[entry.level as number] ?? String(entry.level)).padEnd(5);
      const context = typeof entry.context === 'string' ? `[${entry.context}] ` : '';
      const fields = Object.entries(entry)
        .filter(([key, value]) => !OWN_FIELDS.has(key) && value !== undefined && value !== null)
        .map(
          ([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`,
        );
      out.write(
        `${time} ${level} ${context}${typeof entry.msg === 'string' ? entry.msg : ''}${fields.length ? ` ${fields.join(' ')}` : ''}\n`,
      );
    },
  };
}

/**
 * Nest's start-up chatter (one line per module, route and resolver): debug, so that a start
 * at the default level says only what the service itself has to say.
 */
const FRAMEWORK_STARTUP = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
  'GraphQLModule',
]);

/** How Nest's TypeOrmModule begins its line for each failed connection attempt at start. */
const CONNECTION_RETRY = 'Unable to connect to the database';

/** Nest's own messages (start-up, errors) through the same pino logger. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly pino: Logger) {}
  log(message: unknown, context?: string) {
    if (context && FRAMEWORK_STARTUP.has(context)) this.pino.debug({ context }, String(message));
    else this.pino.info({ context }, String(message));
  }
  error(message: unknown, trace?: string, context?: string) {
    // A connection attempt that failed at start: the Database logger's warning names it.
    if (context === 'TypeOrmModule' && String(message).startsWith(CONNECTION_RETRY))
      this.pino.debug({ context, trace }, String(message));
    else this.pino.error({ context, trace }, String(message));
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
    logRequest(logger, request, reply, maxFieldChars);
    done();
  });
}

/** Writes a request's line (logRequests): also for answers given outside Fastify's hooks. */
export function logRequest(
  logger: Logger,
  request: FastifyRequest,
  reply: FastifyReply,
  maxFieldChars: number,
): void {
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
}
