import { ArgsType, Field, ID, Int } from '@nestjs/graphql';
import { IsOptional, Matches } from 'class-validator';
import { IsName, IsPageSize } from '../../common/validation.js';

@ArgsType()
export class AuditEventsArgs {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int, { defaultValue: 50 })
  @IsPageSize()
  first: number;

  @Field(() => ID, { nullable: true, description: 'the id of the last event of the previous page' })
  @IsOptional()
  @Matches(/^[1-9][0-9]{0,15}$/, { message: 'after must be an audit event id' })
  after?: string | null;
}
