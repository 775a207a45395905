import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { CurrentPrincipal, Roles, Unscoped } from '../auth/roles.decorator.js';
import {
  CreateWebhookInput,
  RedeliverWebhookArgs,
  WebhookDeliveriesArgs,
  WebhookIdArgs,
} from './dto/create-webhook.input.js';
import { CreatedWebhook, Webhook, WebhookDelivery } from './webhook.model.js';
import { WebhookError } from './webhooks.errors.js';
import { WebhooksService } from './webhooks.service.js';

/**
 * A token limited to environments (R26) manages no webhooks: a webhook hears (and its
 * deliveries show) events of every environment it matches, and webhooks are not addressed
 * by environment.
 */
function unscoped(principal: Principal): void {
  if (Array.isArray(principal.environments)) {
    throw new WebhookError(
      'FORBIDDEN',
      'a token limited to environments may not manage webhooks; use an unlimited ADMIN token',
    );
  }
}

/** R22: webhooks are ADMIN only (the empty @Roles()). */
@Resolver(() => Webhook)
export class WebhooksResolver {
  constructor(private readonly service: WebhooksService) {}

  @Roles()
  @Unscoped()
  @Query(() => [Webhook])
  webhooks(@CurrentPrincipal() principal: Principal): Promise<Webhook[]> {
    unscoped(principal);
    return this.service.list();
  }

  @Roles()
  @Unscoped()
  @Query(() => [WebhookDelivery], { description: 'Newest first.' })
  webhookDeliveries(
    @CurrentPrincipal() principal: Principal,
    @Args() args: WebhookDeliveriesArgs,
  ): Promise<WebhookDelivery[]> {
    unscoped(principal);
    return this.service.deliveries(args);
  }

  /** BAD_USER_INPUT naming a bad URL, event type or environment pattern. The secret is shown once. */
  @Roles()
  @Unscoped()
  @Mutation(() => CreatedWebhook)
  createWebhook(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: CreateWebhookInput,
  ): Promise<CreatedWebhook> {
    unscoped(principal);
    return this.service.create(principal, input);
  }

  /** Removes the webhook and its deliveries. NOT_FOUND if unknown. */
  @Roles()
  @Unscoped()
  @Mutation(() => Boolean)
  deleteWebhook(
    @CurrentPrincipal() principal: Principal,
    @Args() { id }: WebhookIdArgs,
  ): Promise<boolean> {
    unscoped(principal);
    return this.service.delete(principal, id);
  }

  /** A FAILED or DELIVERED delivery is sent again (same id). NOT_FOUND if unknown. */
  @Roles()
  @Unscoped()
  @Mutation(() => WebhookDelivery)
  redeliverWebhook(
    @CurrentPrincipal() principal: Principal,
    @Args() { deliveryId }: RedeliverWebhookArgs,
  ): Promise<WebhookDelivery> {
    unscoped(principal);
    return this.service.redeliver(principal, deliveryId);
  }
}
