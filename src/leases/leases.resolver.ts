import { Args, Mutation, Resolver } from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { AcquireLeaseInput, ReleaseLeaseInput, RenewLeaseInput } from './dto/lease.inputs.js';
import { Lease } from './lease.model.js';
import { LeasesService } from './leases.service.js';

@Resolver(() => Lease)
export class LeasesResolver {
  constructor(private readonly leases: LeasesService) {}

  /** A new generation per grant. LEASE_HELD {holder, expiresAt} while another holder's lease is live. */
  @Roles(Role.AGENT)
  @Mutation(() => Lease)
  acquireLease(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: AcquireLeaseInput,
  ): Promise<Lease> {
    return this.leases.acquire(principal, input);
  }

  /** Keeps the generation. LEASE_NOT_HELD when the lease expired, was released or is not the caller's. */
  @Roles(Role.AGENT)
  @Mutation(() => Lease)
  renewLease(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: RenewLeaseInput,
  ): Promise<Lease> {
    return this.leases.renew(principal, input);
  }

  @Roles(Role.AGENT)
  @Mutation(() => Boolean)
  releaseLease(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: ReleaseLeaseInput,
  ): Promise<boolean> {
    return this.leases.release(principal, input);
  }
}
