import { Args, Query, Resolver } from '@nestjs/graphql';
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
}
