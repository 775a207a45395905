import { ArgsType, Field, ID, InputType, Int } from '@nestjs/graphql';
import { IsEnum, IsInt, IsOptional, IsString } from 'class-validator';
import { IsPageSize, IsRowId } from '../../common/validation.js';
import { BATCH_SIZE_DESCRIPTION, DeliveryStatus, WebhookFormat } from '../webhook.model.js';

/**
 * A new webhook. The URL, event types, environment patterns and batch size are checked by the service
 * (WebhooksService.validate), which names the offending value in its BAD_USER_INPUT.
 */
@InputType()
export class CreateWebhookInput {
  @Field({ description: 'http or https' })
  @IsString()
  url: string;

  @Field(() => [String])
  @IsString({ each: true })
  events: string[];

  @Field(() => [String], { nullable: true })
  @IsOptional()
  @IsString({ each: true })
  environments?: string[] | null;

  @Field(() => WebhookFormat, { defaultValue: WebhookFormat.JSON })
  @IsEnum(WebhookFormat)
  format: WebhookFormat;

  @Field(() => Int, { defaultValue: 1, description: BATCH_SIZE_DESCRIPTION })
  @IsInt()
  batchSize: number;
}

@ArgsType()
export class WebhookDeliveriesArgs {
  @Field(() => ID)
  @IsString()
  webhookId: string;

  @Field(() => DeliveryStatus, { nullable: true })
  @IsOptional()
  @IsEnum(DeliveryStatus)
  status?: DeliveryStatus | null;

  @Field(() => Int, { defaultValue: 50 })
  @IsPageSize()
  first: number;
}

@ArgsType()
export class RedeliverWebhookArgs {
  @Field(() => ID)
  @IsRowId('a delivery id')
  deliveryId: string;
}

@ArgsType()
export class WebhookIdArgs {
  @Field(() => ID)
  @IsString()
  id: string;
}
