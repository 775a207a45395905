import { ArgsType, Field, ID, InputType, Int } from '@nestjs/graphql';
import { IsInt, Max, Min } from 'class-validator';
import { IsName, IsOptionalShortText, IsRowId, IsTtlSeconds } from '../../common/validation.js';

export const MAX_WAIT_SECONDS = 86_400;

@InputType()
export class EnqueueLeaseInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int, { defaultValue: 30, description: '1..3600, counted from the grant' })
  @IsTtlSeconds()
  ttlSeconds: number;

  @Field(() => String, { nullable: true })
  @IsOptionalShortText()
  instance?: string | null;

  @Field(() => Int, { defaultValue: 600, description: '1..86400' })
  @IsInt()
  @Min(1, { message: `$property must be 1 to ${MAX_WAIT_SECONDS}` })
  @Max(MAX_WAIT_SECONDS, { message: `$property must be 1 to ${MAX_WAIT_SECONDS}` })
  maxWaitSeconds: number;
}

@ArgsType()
export class LeaseTicketArgs {
  @Field(() => ID)
  @IsRowId('a lease ticket id')
  id: string;
}
