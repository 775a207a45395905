import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { EVENT_TYPES } from '../outbox/outbox-event.js';

export enum WebhookFormat {
  JSON = 'JSON',
  SLACK = 'SLACK',
}

registerEnumType(WebhookFormat, { name: 'WebhookFormat' });

/** The most events one request of a webhook may carry. */
export const MAX_BATCH_SIZE = 100;

export const BATCH_SIZE_DESCRIPTION =
  `Events per request, 1..${MAX_BATCH_SIZE}. 1: one event per request, the body is the event. ` +
  'More: up to this many consecutive events of one environment per request, the body ' +
  '{ "deliveries": [ { "delivery": "<id>", ...event } ] } in commit order, and the ' +
  'Planfence-Delivery and Planfence-Event headers list every delivery and event type of it.';

export enum DeliveryStatus {
  PENDING = 'PENDING',
  DELIVERED = 'DELIVERED',
  FAILED = 'FAILED',
}

registerEnumType(DeliveryStatus, { name: 'DeliveryStatus' });

/** A receiver of events (docs/design.md R22). Its secret is never read back. */
@ObjectType()
export class Webhook {
  @Field(() => ID)
  id: string;

  @Field()
  url: string;

  @Field(() => [String], { description: EVENT_TYPES.join(', ') })
  events: string[];

  @Field(() => [String], { nullable: true, description: 'Environment name patterns; null: all.' })
  environments: string[] | null;

  @Field(() => WebhookFormat)
  format: WebhookFormat;

  @Field(() => Int, { description: BATCH_SIZE_DESCRIPTION })
  batchSize: number;

  @Field(() => GraphQLISODateTime)
  createdAt: Date;
}

@ObjectType()
export class CreatedWebhook {
  @Field(() => Webhook)
  webhook: Webhook;

  @Field({ description: 'HMAC-SHA256 signing secret, shown once.' })
  secret: string;
}

/** One event on its way to one webhook (R23); its id is the `Planfence-Delivery` header. */
@ObjectType()
export class WebhookDelivery {
  @Field(() => ID)
  id: string;

  @Field(() => ID)
  webhookId: string;

  @Field()
  event: string;

  @Field()
  environment: string;

  @Field(() => DeliveryStatus)
  status: DeliveryStatus;

  @Field(() => Int)
  attempts: number;

  @Field(() => GraphQLISODateTime)
  createdAt: Date;

  @Field(() => GraphQLISODateTime, { nullable: true })
  lastAttemptAt: Date | null;

  @Field(() => GraphQLISODateTime, { nullable: true })
  nextAttemptAt: Date | null;

  @Field(() => String, { nullable: true })
  lastError: string | null;

  @Field(() => GraphQLISODateTime, { nullable: true })
  deliveredAt: Date | null;
}
