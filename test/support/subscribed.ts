import { until } from './until.js';
import { metric } from './metrics.js';

/** How many subscriptions of `field` the service at `url` has opened so far. */
const subscriptionsOpened = (url: string, field: string) =>
  metric(url, `planfence_subscriptions_total{field="${field}"}`);

/**
 * Subscribes with `subscribe` and returns once the service listens for it: its count of
 * opened `field` subscriptions has moved `count` past what it was before. An event committed
 * after this reaches the subscriber; no fixed wait guesses how long registration takes.
 */
export async function subscribed<T>(
  url: string,
  field: string,
  subscribe: () => T,
  count = 1,
): Promise<T> {
  const before = await subscriptionsOpened(url, field);
  const subscription = subscribe();
  let opened = before;
  // Many subscriptions are admitted one per turn: the wait fails only once none opens for a while.
  await until(
    `${count} ${field} subscription(s) to be open`,
    async () =>
      (opened = await subscriptionsOpened(url, field)) >= before + count ? true : undefined,
    { progress: () => opened },
  );
  return subscription;
}
