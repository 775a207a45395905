import { Args, Context, Query, Resolver, Subscription } from '@nestjs/graphql';
import { EnvironmentArgs } from '../environments/dto/environment.args.js';
import { auditRecordedTopic } from '../events/events.service.js';
import { AuditEvent } from './audit-event.entity.js';
import { AuditService } from './audit.service.js';
import { AuditEventsArgs } from './dto/audit-events.args.js';

@Resolver(() => AuditEvent)
export class AuditResolver {
  constructor(private readonly audit: AuditService) {}

  /** Newest first. NOT_FOUND for an unknown environment. */
  @Query(() => [AuditEvent], { description: 'Newest first.' })
  auditEvents(@Args() args: AuditEventsArgs): Promise<AuditEvent[]> {
    return this.audit.list(args.environment, args.first, args.after ? Number(args.after) : null);
  }

  /** Every audit event of the environment (accepted and rejected decisions), after its commit. */
  @Subscription(() => AuditEvent)
  auditEventRecorded(
    @Args() { environment }: EnvironmentArgs,
    @Context('pubsub') pubsub: { subscribe(topic: string): Promise<AsyncIterable<unknown>> },
  ): Promise<AsyncIterable<unknown>> {
    return pubsub.subscribe(auditRecordedTopic(environment));
  }
}
