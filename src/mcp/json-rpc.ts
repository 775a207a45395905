import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { LoggedRequest } from '../common/logging.js';

/**
 * A JSON-RPC error answer outside any request (the MCP transport's own shape); `data`, when
 * given, carries the refusal's code and extensions as GraphQL gives them.
 */
export function rpcError(
  code: number,
  message: string,
  id: unknown = null,
  data?: Record<string, unknown>,
) {
  return { jsonrpc: '2.0', error: { code, message, ...(data ? { data } : {}) }, id };
}

/** The request log's outcome for a JSON-RPC error the transport answers with. */
export const RPC_OUTCOMES: Record<number, string> = {
  [-32700]: 'PARSE_ERROR',
  [-32600]: 'INVALID_REQUEST',
  [-32601]: 'METHOD_NOT_FOUND',
  [-32602]: 'INVALID_PARAMS',
  [-32603]: 'INTERNAL',
};

/** The JSON-RPC error a request to POST /mcp gets for a body it cannot read. */
interface Unreadable {
  code: number;
  message: string;
  /** The request log's outcome. */
  outcome: string;
}

/**
 * Fastify's codes for a body it could not read, and the JSON-RPC error each is to an MCP
 * client: a body that is not JSON is a parse error; one of another media type (a form) is
 * the -32000 the MCP SDK's own transport answers it with. The HTTP status stays Fastify's
 * (400, 415).
 */
function unreadable(error: FastifyError): Unreadable | null {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: -32700, message: `Parse error: ${error.message}`, outcome: 'PARSE_ERROR' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return {
        code: -32000,
        message: 'Unsupported Media Type: Content-Type must be application/json',
        outcome: 'UNSUPPORTED_MEDIA_TYPE',
      };
    default:
      return null;
  }
}

/** Where a request to POST /mcp keeps the JSON-RPC error its unreadable body gets. */
const UNREADABLE = Symbol('unreadable MCP body');
type MarkedRequest = FastifyRequest & LoggedRequest & { [UNREADABLE]?: Unreadable };

/**
 * A body POST /mcp cannot read is answered as JSON-RPC says instead of with the HTTP
 * layer's own error shape, which an MCP client cannot read. Hooks, not an error handler:
 * the error handlers stay Nest's and Fastify's.
 */
export function answerUnreadableMcpBodies(fastify: FastifyInstance): void {
  fastify.addHook('onError', (request: MarkedRequest, _reply, error: FastifyError, done) => {
    const answer = request.routeOptions.url === '/mcp' ? unreadable(error) : null;
    if (answer) {
      request[UNREADABLE] = answer;
      request.outcome = answer.outcome;
    }
    done();
  });
  fastify.addHook('onSend', (request: MarkedRequest, reply, payload, done) => {
    const answer = request[UNREADABLE];
    if (answer === undefined) return done(null, payload);
    reply.header('content-type', 'application/json; charset=utf-8');
    done(null, JSON.stringify(rpcError(answer.code, answer.message)));
  });
}
