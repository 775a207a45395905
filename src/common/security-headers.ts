import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * The headers helmet sets for `options`, computed once. Helmet's middleware only sets and
 * removes fixed headers for a static policy, so what it would do per request is the same
 * every time; building it per request (as its Fastify plugin does) costs an allocation-heavy
 * policy build on every call.
 */
export function helmetHeaders(options: HelmetOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const response = {
    setHeader(name: string, value: unknown) {
      headers[name.toLowerCase()] = String(value);
    },
    removeHeader(name: string) {
      delete headers[name.toLowerCase()];
    },
  };
  let done = false;
  helmet(options)(
    {} as IncomingMessage,
    response as unknown as ServerResponse,
    (error?: unknown) => {
      if (error) throw error instanceof Error ? error : new Error('helmet refused its options');
      done = true;
    },
  );
  if (!done) throw new Error('helmet did not set its headers synchronously');
  return headers;
}

/** Sets helmet's headers for `options` on every response, computed once at start. */
export function securityHeaders(fastify: FastifyInstance, options: HelmetOptions): void {
  const headers = helmetHeaders(options);
  fastify.addHook('onRequest', (_request, reply, done) => {
    void reply.headers(headers);
    done();
  });
}
