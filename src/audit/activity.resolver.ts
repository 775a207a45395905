import { Context, Resolver, Subscription } from '@nestjs/graphql';
import { SubscriptionFeeds, type SubscriptionPubSub } from '../events/feeds.js';
import { AuditEvent } from './audit-event.entity.js';

interface ActivityContext {
  req?: { principal?: { environments?: string[] | null } };
}

/** `*` matches any run of characters; everything else matches itself. */
function matchesPattern(name: string, pattern: string): boolean {
  const expression = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\-]/g, '\\$&'));
  return new RegExp(`^${expression.join('.*')}$`).test(name);
}

/**
 * The audit events of every environment on one subscription: a dashboard stays live
 * over any number of environments with a constant number of subscriptions. A principal
 * limited to some environments hears only theirs.
 */
@Resolver(() => AuditEvent)
export class ActivityResolver {
  constructor(private readonly feeds: SubscriptionFeeds) {}

  @Subscription(() => AuditEvent, {
    description: 'Every audit event of every environment the caller may read, after its commit.',
    filter: (payload: { activityRecorded: AuditEvent }, _: unknown, context: ActivityContext) => {
      const patterns = context.req?.principal?.environments;
      if (!Array.isArray(patterns)) return true;
      const environment = payload.activityRecorded.environment;
      return patterns.some((pattern) => matchesPattern(environment, pattern));
    },
  })
  activityRecorded(@Context('pubsub') pubsub: SubscriptionPubSub): Promise<AsyncIterable<unknown>> {
    return this.feeds.activityRecorded(pubsub);
  }
}
