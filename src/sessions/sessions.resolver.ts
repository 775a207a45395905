import {
  Args,
  Context,
  ID,
  Int,
  Mutation,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { CurrentPrincipal, Roles, Unscoped } from '../auth/roles.decorator.js';
import type { CookieRequest } from '../auth/authenticate.js';
import { AuthError } from '../auth/auth.errors.js';
import { InputError } from '../common/errors.js';
import { Database } from '../database/database.js';
import { findOne } from '../database/rows.js';
import { Session, SESSION_COOKIE } from './session.entity.js';
import { SessionsService } from './sessions.service.js';

interface GqlContext {
  req: CookieRequest;
  reply?: { header(name: string, value: string): unknown };
}

/** DESIGN R41: a person's own session, ADMIN's list of sessions, logout, endSession. */
@Resolver(() => Session)
export class SessionsResolver {
  constructor(
    private readonly service: SessionsService,
    private readonly db: Database,
  ) {}

  @Query(() => Session, {
    nullable: true,
    description: "The caller's own session, where the request came with one.",
  })
  async mySession(@Context() context: GqlContext): Promise<Session | null> {
    const own = context.req.session;
    if (!own) return null;
    const { session } = await this.service.authenticate(own.secret);
    return this.service.view(session, own.secret);
  }

  @Roles()
  @Unscoped()
  @Query(() => [Session], { description: 'ADMIN.' })
  async sessions(
    @Args('principal', { type: () => String, nullable: true }) principal: string | null,
    @Args('first', { type: () => Int, defaultValue: 50 }) first: number,
  ): Promise<Session[]> {
    return (await this.service.list(principal ?? null, first)).map((s) => this.service.view(s));
  }

  @Mutation(() => Boolean, { description: "Ends the caller's session (the cookie is cleared)." })
  async logout(
    @Context() context: GqlContext,
    @CurrentPrincipal() principal: Principal,
  ): Promise<boolean> {
    const own = context.req.session;
    if (!own)
      throw new InputError(
        'BAD_USER_INPUT',
        `${principal.name} is not signed in with a session (a token is revoked with revokeToken)`,
      );
    const ended = await this.service.end(own.id);
    if (own.byCookie)
      context.reply?.header(
        'set-cookie',
        `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax`,
      );
    return ended;
  }

  @Roles()
  @Unscoped()
  @Mutation(() => Boolean, { description: 'ADMIN: ends a session now, on every instance.' })
  async endSession(@Args('id', { type: () => ID }) id: string): Promise<boolean> {
    const ended = await this.service.end(id);
    if (!ended) throw new AuthError('NOT_FOUND', `no open session "${id}"`);
    return ended;
  }

  @ResolveField('principal', () => Principal)
  async principal(@Parent() session: Session): Promise<Principal> {
    const found = await this.db.read((m) => findOne(m, Principal, { name: session.principalName }));
    return found!;
  }
}
