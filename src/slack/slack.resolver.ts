import {
  Args,
  Field,
  GraphQLISODateTime,
  Mutation,
  ObjectType,
  Parent,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { CurrentPrincipal } from '../auth/roles.decorator.js';
import { SlackLinks } from './slack-links.js';

@ObjectType()
export class SlackLink {
  @Field()
  teamId: string;

  @Field()
  userId: string;

  @Field(() => GraphQLISODateTime)
  linkedAt: Date;
}

/**
 * R46. linkSlack is for any authenticated principal (a person signed in to the console is
 * one): the one-time code proves the Slack user asked for it, the caller's credential who
 * it binds to. unlinkSlack: the linked person or an ADMIN.
 */
@Resolver(() => Principal)
export class SlackResolver {
  constructor(private readonly links: SlackLinks) {}

  @Mutation(() => SlackLink, {
    description:
      'A signed-in person binds the Slack user behind a one-time link code (DESIGN R46).',
  })
  linkSlack(
    @CurrentPrincipal() principal: Principal,
    @Args('code') code: string,
  ): Promise<SlackLink> {
    return this.links.link(principal, code);
  }

  @Mutation(() => Boolean)
  unlinkSlack(
    @CurrentPrincipal() principal: Principal,
    @Args('teamId') teamId: string,
    @Args('userId') userId: string,
  ): Promise<boolean> {
    return this.links.unlink(principal, teamId, userId);
  }

  @ResolveField('slackLinks', () => [SlackLink])
  slackLinks(@Parent() principal: Principal): Promise<SlackLink[]> {
    return this.links.linksOf(principal.name);
  }
}
