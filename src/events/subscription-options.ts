import type { MercuriusDriverConfig } from '@nestjs/mercurius';

/** How GraphQL subscriptions over graphql-ws are accepted and authenticated. */
export function subscriptionOptions(): MercuriusDriverConfig['subscription'] {
  return {
    // graphql-ws connection parameters carry the bearer token: { authorization: 'Bearer ...' }.
    onConnect: ({ payload }: { payload?: Record<string, unknown> }) => ({
      req: { headers: { authorization: payload?.authorization ?? payload?.Authorization } },
    }),
  };
}
