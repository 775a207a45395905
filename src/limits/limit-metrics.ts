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

/** Token lookups (one per request at most), by outcome: ok or the error code. */
export function authentications(registry: Registry): Counter<'outcome'> {
  return counter(
    registry,
    AUTHENTICATIONS,
    'Bearer token lookups of GraphQL requests (at most one per request), by outcome',
    ['outcome'],
  );
}
