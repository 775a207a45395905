import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import type { WebSocket } from 'ws';
import { sessionOf, type SubscriptionContext } from './socket-gate.js';

/**
 * How GraphQL subscriptions over graphql-ws are accepted and authenticated. The socket's
 * `connection_init` carries the bearer token (`{ authorization: 'Bearer ...' }`); SocketGate
 * checks it, and Mercurius acknowledges the connection only after that check passed (a
 * refused socket is already closed, so the acknowledgement never leaves).
 */
export function subscriptionOptions(): MercuriusDriverConfig['subscription'] {
  return {
    context: async (socket: WebSocket): Promise<SubscriptionContext> => {
      const session = sessionOf(socket);
      const request = session?.admission ? await session.admission : null;
      if (!session || !request) {
        // Refused sockets are closed already; one the gate never saw is closed here.
        socket.close(4403, 'UNAUTHENTICATED: this socket was not admitted');
        return {};
      }
      return { req: request, planfenceSocket: session };
    },
  };
}
