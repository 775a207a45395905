import {
  Args,
  Context,
  Mutation,
  Parent,
  Query,
  ResolveField,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import { Principal } from '../auth/principal.entity.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { EnvironmentArgs } from '../environments/dto/environment.args.js';
import type { SubscriptionPubSub } from '../events/feeds.js';
import { EnqueueLeaseInput, LeaseTicketArgs } from './dto/lease-queue.inputs.js';
import { LeaseQueueService } from './lease-queue.service.js';
import { LeaseTicket } from './lease-ticket.entity.js';
import { Lease } from './lease.model.js';

@Resolver(() => LeaseTicket)
export class LeaseQueueResolver {
  constructor(private readonly queue: LeaseQueueService) {}

  /** R37–R39: GRANTED at once when the environment is free and nobody waits, else WAITING. QUEUE_FULL {max}. */
  @Roles(Role.AGENT)
  @Mutation(() => LeaseTicket, {
    description: "Waits for the environment's lease instead of failing with LEASE_HELD.",
  })
  enqueueLease(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: EnqueueLeaseInput,
  ): Promise<LeaseTicket> {
    return this.queue.enqueue(principal, input);
  }

  /** Its owner or an ADMIN (FORBIDDEN otherwise). A ticket no longer WAITING is returned unchanged. */
  @Roles(Role.AGENT)
  @Mutation(() => LeaseTicket)
  cancelLeaseTicket(
    @CurrentPrincipal() principal: Principal,
    @Args() { id }: LeaseTicketArgs,
  ): Promise<LeaseTicket> {
    return this.queue.cancel(principal, id);
  }

  @Query(() => LeaseTicket, { nullable: true })
  leaseTicket(@Args() { id }: LeaseTicketArgs): Promise<LeaseTicket | null> {
    return this.queue.find(id);
  }

  @Query(() => [LeaseTicket], { description: 'WAITING tickets in grant order.' })
  leaseQueue(@Args() { environment }: EnvironmentArgs): Promise<LeaseTicket[]> {
    return this.queue.queue(environment);
  }

  @Subscription(() => LeaseTicket, {
    description: 'Every status change of one ticket, starting with its current state.',
  })
  leaseTicketChanged(
    @Args() { id }: LeaseTicketArgs,
    @Context('pubsub') pubsub: SubscriptionPubSub,
  ): Promise<AsyncIterable<unknown>> {
    return this.queue.changes(pubsub, id);
  }

  @ResolveField('lease', () => Lease, {
    nullable: true,
    description: 'The lease granted to this ticket (GRANTED only).',
  })
  lease(@Parent() ticket: LeaseTicket): Promise<Lease | null> {
    return this.queue.lease(ticket);
  }
}
