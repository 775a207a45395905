import { Counter, type Registry } from 'prom-client';

const REFUSED = 'planfence_requests_refused_total';
const AUTHENTICATIONS = 'planfence_authentications_total';

function counter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
): Counter<L> {
  return (
    (registry.getSingleMetric(name) as Counter<L> | undefined) ??
    new Counter({ name, help, labelNames, registers: [registry] })
  );
}

/** GraphQL requests refused before execution, by the limit they broke. */
export function refusedRequests(registry: Registry): Counter<'limit'> {
  return counter(registry, REFUSED, 'GraphQL requests refused before any resolver ran, by limit', [
    'limit',
  ]);
}

/**
 * Token lookups, by outcome: ok or the error code. One per request, two where a principal
 * taken from memory had to be read from the database after all (PostgreSQL).
 */
export function authentications(registry: Registry): Counter<'outcome'> {
  return counter(
    registry,
    AUTHENTICATIONS,
    'Bearer token lookups of GraphQL requests (one per request; two where a remembered principal is read again), by outcome',
    ['outcome'],
  );
}
