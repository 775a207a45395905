import { Args, Context, Mutation, Resolver } from '@nestjs/graphql';
import { ExchangeOidcTokenArgs } from '../auth/dto/token.args.js';
import { IssuedToken } from '../model/principal.entity.js';
import { Public } from '../auth/roles.decorator.js';
import { OidcService } from './oidc.service.js';

@Resolver()
export class IdentityResolver {
  constructor(private readonly oidc: OidcService) {}

  /**
   * R25. No bearer token: the OIDC JWT is the credential. A planfence token for the
   * principal the first matching rule names, expiring with the JWT and within an hour.
   * UNAUTHENTICATED for a token that fails verification or was exchanged before;
   * FORBIDDEN when no rule matches (the message names the claims that failed).
   */
  @Public()
  @Mutation(() => IssuedToken, {
    description:
      'No authentication needed: the OIDC JWT is the credential. Returns a short-lived token.',
  })
  exchangeOidcToken(
    @Args() { token }: ExchangeOidcTokenArgs,
    @Context('req') req: { ip?: string } | undefined,
  ): Promise<IssuedToken> {
    return this.oidc.exchange(token, req?.ip ?? '');
  }
}
