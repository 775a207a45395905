import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { LoggedRequest } from '../common/logging.js';

/** A JSON-RPC error answer outside any request (the MCP transport's own shape). */
export function rpcError(code: number, message: string, id: unknown = null) {
  return { jsonrpc: '2.0', error: { code, message }, id };
}

/** The request log's outcome for a JSON-RPC error the transport answers with. */
export const RPC_OUTCOMES: Record<number, string> = {
  [-32700]: 'PARSE_ERROR',
  [-32600]: 'INVALID_REQUEST',
  [-32601]: 'METHOD_NOT_FOUND',
  [-32602]: 'INVALID_PARAMS',
  [-32603]: 'INTERNAL',
};

/** Fastify's codes for a JSON body it could not read. */
const UNREADABLE_BODY = new Set(['FST_ERR_CTP_INVALID_JSON_BODY', 'FST_ERR_CTP_EMPTY_JSON_BODY']);

/** Where a request to POST /mcp keeps why its body could not be read. */
const UNREADABLE = Symbol('unreadable MCP body');
type MarkedRequest = FastifyRequest & LoggedRequest & { [UNREADABLE]?: string };

/**
 * A body that is not JSON, sent to POST /mcp, is answered as JSON-RPC says (-32700, parse
 * error, HTTP 400) instead of with the HTTP layer's own error shape, which an MCP client
 * cannot read. Hooks, not an error handler: the error handlers stay Nest's and Fastify's.
 */
export function answerUnreadableMcpBodies(fastify: FastifyInstance): void {
  fastify.addHook('onError', (request: MarkedRequest, _reply, error: FastifyError, done) => {
    if (request.routeOptions.url === '/mcp' && UNREADABLE_BODY.has(error.code)) {
      request[UNREADABLE] = error.message;
      request.outcome = RPC_OUTCOMES[-32700];
    }
    done();
  });
  fastify.addHook('onSend', (request: MarkedRequest, reply, payload, done) => {
    const unreadable = request[UNREADABLE];
    if (unreadable === undefined) return done(null, payload);
    reply.header('content-type', 'application/json; charset=utf-8');
    done(null, JSON.stringify(rpcError(-32700, `Parse error: ${unreadable}`)));
  });
}
