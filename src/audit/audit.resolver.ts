import { Args, Context, Query, Resolver, Subscription } from '@nestjs/graphql';
import { SubscriptionFeeds, type SubscriptionCall } from '../events/feeds.js';
import { AuditEventRecordedArgs } from '../events/subscription.args.js';
import { AuditEvent } from '../model/audit-event.entity.js';
import { AuditService } from './audit.service.js';
import { AuditEventsArgs } from './dto/audit-events.args.js';

@Resolver(() => AuditEvent)
export class AuditResolver {
  constructor(
    private readonly audit: AuditService,
    private readonly feeds: SubscriptionFeeds,
  ) {}

  /** Newest first. NOT_FOUND for an unknown environment. */
  @Query(() => [AuditEvent], { description: 'Newest first.' })
  auditEvents(@Args() args: AuditEventsArgs): Promise<AuditEvent[]> {
    return this.audit.list(args.environment, args.first, args.after ? Number(args.after) : null);
  }

  /**
   * Every audit event of the environment (accepted and rejected decisions), after its commit,
   * heard from every instance. `after`: the id of the last event received; the events with a
   * larger id come first (docs/subscriptions.md).
   */
  @Subscription(() => AuditEvent)
  auditEventRecorded(
    @Args() { environment, after }: AuditEventRecordedArgs,
    @Context() call: SubscriptionCall,
  ): Promise<AsyncIterable<unknown>> {
    return this.feeds.auditEventRecorded(call, environment, after);
  }
}
