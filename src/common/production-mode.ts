/**
 * The service runs its packages in their production mode unless NODE_ENV says otherwise.
 * graphql-js then checks a schema type with `instanceof` alone (in its development mode every
 * failed check also looks for a second copy of graphql, several times per request), and
 * graphql-ws closes a socket after an internal error with "Internal server error" instead of
 * the error's own message. The entry point imports this first, so that those packages see it
 * as they load (docs/performance.md, "NODE_ENV=production by default").
 */
process.env.NODE_ENV ??= 'production';
