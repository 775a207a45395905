import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { AuthService } from './auth.service.js';
import { IssueTokenArgs, RevokeTokenArgs, SetPrincipalGroupsArgs } from './dto/token.args.js';
import { IssuedToken, Principal } from './principal.entity.js';
import { CurrentPrincipal, Roles } from './roles.decorator.js';

@Resolver(() => Principal)
export class AuthResolver {
  constructor(private readonly auth: AuthService) {}

  @Query(() => Principal)
  whoami(@CurrentPrincipal() principal: Principal): Principal {
    return principal;
  }

  /** ADMIN only. The token is in the answer once; ALREADY_EXISTS when the name is taken. */
  @Roles()
  @Mutation(() => IssuedToken)
  async issueToken(@Args() { name, role, groups }: IssueTokenArgs): Promise<IssuedToken> {
    const issued = await this.auth.issueToken(name, role);
    if (groups?.length) await this.auth.setPrincipalGroups(name, groups);
    return issued;
  }

  /** ADMIN only. Replaces the principal's groups (R14); later approval decisions count them. */
  @Roles()
  @Mutation(() => Principal)
  setPrincipalGroups(@Args() { name, groups }: SetPrincipalGroupsArgs): Promise<Principal> {
    return this.auth.setPrincipalGroups(name, groups);
  }

  @ResolveField('groups', () => [String])
  groups(@Parent() principal: Principal): Promise<string[]> {
    return this.auth.groupsOf(principal.name);
  }

  /**
   * ADMIN only. The principal's token stops working at once, its open WebSockets close;
   * its name stays taken. FORBIDDEN for the last ADMIN whose token works.
   */
  @Roles()
  @Mutation(() => Principal)
  revokeToken(@Args() { name }: RevokeTokenArgs): Promise<Principal> {
    return this.auth.revokeToken(name);
  }
}
