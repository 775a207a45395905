import { ArgsType, Field, ID, Int } from '@nestjs/graphql';
import { IsOptional } from 'class-validator';
import { IsName, IsPageSize, IsRowId } from '../../common/validation.js';

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
  @IsRowId('an audit event id')
  after?: string | null;
}
