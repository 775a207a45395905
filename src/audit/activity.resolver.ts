import { Context, Resolver, Subscription } from '@nestjs/graphql';
import { type SubscriptionCall, SubscriptionFeeds } from '../events/feeds.js';
import { AuditEvent } from '../model/audit-event.entity.js';

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
  })
  activityRecorded(@Context() call: SubscriptionCall): Promise<AsyncIterable<unknown>> {
    return this.feeds.activityRecorded(call);
  }
}
