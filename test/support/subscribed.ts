import { until } from './until.js';

/** How many subscriptions of `field` the service at `url` has opened so far (its /metrics). */
export async function subscriptionsOpened(url: string, field: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`planfence_subscriptions_total{field="${field}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/**
 * Subscribes with `subscribe` and returns once the service listens for it: its count of
 * opened `field` subscriptions has moved past what it was before. An event committed after
 * this reaches the subscriber; no fixed wait guesses how long registration takes.
 */
export async function subscribed<T>(url: string, field: string, subscribe: () => T): Promise<T> {
  const before = await subscriptionsOpened(url, field);
  const subscription = subscribe();
  await until(`the ${field} subscription to be open`, async () =>
    (await subscriptionsOpened(url, field)) > before ? true : undefined,
  );
  return subscription;
}
