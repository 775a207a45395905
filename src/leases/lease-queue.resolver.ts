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
import { Access } from '../access/access.js';
import { Principal } from '../model/principal.entity.js';
import { DomainError } from '../common/errors.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { EnvironmentArgs } from '../common/environment.args.js';
import type { SubscriptionPubSub } from '../events/feeds.js';
import { EnqueueLeaseInput, LeaseTicketArgs } from './dto/lease-queue.inputs.js';
import { QueueError } from '../model/lease-queue.errors.js';
import { LeaseQueueService } from './lease-queue.service.js';
import { LeaseTicket } from '../model/lease-ticket.entity.js';
import { Lease } from './lease.model.js';

/**
 * R26 for the operations addressed by ticket id: the id does not name the environment, so
 * the ticket's own is checked once it is read. A ticket outside the token's environments is
 * answered exactly as an unknown id (null, NOT_FOUND "does not exist"): a FORBIDDEN naming
 * its environment would tell a limited token which ids exist and where. The refusal is
 * still audited in that environment and charged to the caller's rate, as any other.
 */
@Resolver(() => LeaseTicket)
export class LeaseQueueResolver {
  constructor(
    private readonly queue: LeaseQueueService,
    private readonly access: Access,
  ) {}

  /**
   * The ticket, or null for an unknown id and for a ticket of an environment outside the
   * token's patterns (the refusal audited and charged by checkScope, then answered as unknown).
   */
  private async inScope(
    principal: Principal,
    handler: string,
    id: string,
    request: object,
  ): Promise<LeaseTicket | null> {
    const ticket = await this.queue.find(id);
    if (!ticket) return null;
    try {
      await this.access.checkScope(
        principal,
        handler,
        { environment: ticket.environment },
        'graphql',
        request,
      );
    } catch (error) {
      if (error instanceof DomainError && error.code === 'FORBIDDEN') return null;
      throw error;
    }
    return ticket;
  }

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
  async cancelLeaseTicket(
    @CurrentPrincipal() principal: Principal,
    @Args() { id }: LeaseTicketArgs,
    @Context() request: object,
  ): Promise<LeaseTicket> {
    const ticket = await this.inScope(principal, 'cancelLeaseTicket', id, request);
    if (!ticket) throw QueueError.ticketNotFound(id);
    return this.queue.cancel(principal, ticket);
  }

  /** null for an unknown id, and for a ticket of an environment outside the token's (alike). */
  @Query(() => LeaseTicket, { nullable: true })
  async leaseTicket(
    @CurrentPrincipal() principal: Principal,
    @Args() { id }: LeaseTicketArgs,
    @Context() request: object,
  ): Promise<LeaseTicket | null> {
    return this.inScope(principal, 'leaseTicket', id, request);
  }

  @Query(() => [LeaseTicket], { description: 'WAITING tickets in grant order.' })
  leaseQueue(@Args() { environment }: EnvironmentArgs): Promise<LeaseTicket[]> {
    return this.queue.queue(environment);
  }

  @Subscription(() => LeaseTicket, {
    description: 'Every status change of one ticket, starting with its current state.',
  })
  async leaseTicketChanged(
    @CurrentPrincipal() principal: Principal,
    @Args() { id }: LeaseTicketArgs,
    @Context() call: { pubsub: SubscriptionPubSub },
  ): Promise<AsyncIterable<unknown>> {
    // Outside the token's environments: the same error as an unknown id.
    if (!(await this.inScope(principal, 'leaseTicketChanged', id, call)))
      throw QueueError.ticketNotFound(id);
    return this.queue.changes(call.pubsub, id);
  }

  @ResolveField('lease', () => Lease, {
    nullable: true,
    description: 'The lease granted to this ticket (GRANTED only).',
  })
  lease(@Parent() ticket: LeaseTicket): Promise<Lease | null> {
    return this.queue.lease(ticket);
  }
}
