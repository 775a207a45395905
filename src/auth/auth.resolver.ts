import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { AuthService } from './auth.service.js';
import { IssueTokenArgs, RevokeTokenArgs } from './dto/token.args.js';
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
  issueToken(@Args() { name, role }: IssueTokenArgs): Promise<IssuedToken> {
    return this.auth.issueToken(name, role);
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
