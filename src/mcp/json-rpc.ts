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

/**
 * A body that is not JSON, sent to POST /mcp, is answered as JSON-RPC says (-32700, parse
 * error, HTTP 400) instead of with the HTTP layer's own error shape, which an MCP client
 * cannot read. Every other error goes on to Fastify's handler unchanged.
 */
export function answerUnreadableMcpBodies(fastify: FastifyInstance): void {
  fastify.setErrorHandler((error: FastifyError, request: FastifyRequest, reply) => {
    if (request.routeOptions.url === '/mcp' && UNREADABLE_BODY.has(error.code)) {
      (request as FastifyRequest & LoggedRequest).outcome = RPC_OUTCOMES[-32700];
      return reply.code(400).send(rpcError(-32700, `Parse error: ${error.message}`));
    }
    return reply.send(error);
  });
}
