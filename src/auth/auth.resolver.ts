import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { AuthService } from './auth.service.js';
import {
  IssueTokenArgs,
  RevokeTokenArgs,
  RotateTokenArgs,
  SetPrincipalGroupsArgs,
} from './dto/token.args.js';
import { IssuedToken, Principal } from '../model/principal.entity.js';
import { Person, personOf } from './person.model.js';
import { CurrentPrincipal, Roles, Unscoped } from './roles.decorator.js';

@Resolver(() => Principal)
export class AuthResolver {
  constructor(private readonly auth: AuthService) {}

  @Query(() => Principal)
  whoami(@CurrentPrincipal() principal: Principal): Principal {
    return principal;
  }

  /** ADMIN only. The token is in the answer once; ALREADY_EXISTS when the name is taken. */
  @Roles()
  @Unscoped()
  @Mutation(() => IssuedToken)
  async issueToken(
    @Args() { name, role, groups, environments, expiresInSeconds }: IssueTokenArgs,
  ): Promise<IssuedToken> {
    return this.auth.issueToken(name, role, { groups, environments, expiresInSeconds });
  }

  /** ADMIN only (R26). A new secret, shown once; the old one stops at once, open WebSockets included. */
  @Roles()
  @Unscoped()
  @Mutation(() => IssuedToken, {
    description: 'A new secret for the principal; the old one stops at once.',
  })
  rotateToken(@Args() { name }: RotateTokenArgs): Promise<IssuedToken> {
    return this.auth.rotateToken(name);
  }

  /** ADMIN only. Every principal, revoked and expired ones too, in name order. */
  @Roles()
  @Unscoped()
  @Query(() => [Principal])
  principals(): Promise<Principal[]> {
    return this.auth.list();
  }

  /** ADMIN only. Replaces the principal's groups (R14); later approval decisions count them. */
  @Roles()
  @Unscoped()
  @Mutation(() => Principal)
  setPrincipalGroups(@Args() { name, groups }: SetPrincipalGroupsArgs): Promise<Principal> {
    return this.auth.setPrincipalGroups(name, groups);
  }

  @ResolveField('person', () => Person, {
    nullable: true,
    description: 'Set for a person who signs in (DESIGN R40).',
  })
  person(@Parent() principal: Principal): Person | null {
    return personOf({
      personIssuer: principal.personIssuer ?? null,
      personSubject: principal.personSubject ?? null,
      personEmail: principal.personEmail ?? null,
      personName: principal.personName ?? null,
    });
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
  @Unscoped()
  @Mutation(() => Principal)
  revokeToken(@Args() { name }: RevokeTokenArgs): Promise<Principal> {
    return this.auth.revokeToken(name);
  }
}
