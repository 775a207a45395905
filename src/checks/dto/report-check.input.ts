import { Field, ID, InputType } from '@nestjs/graphql';
import { IsOptional, IsUrl, Length } from 'class-validator';
import { IsName, IsPlanId } from '../../common/validation.js';
import { CheckStatus } from '../check-result.model.js';

@InputType()
export class ReportCheckInput {
  @Field(() => ID)
  @IsPlanId()
  planId: string;

  @Field({ description: 'Like an environment name.' })
  @IsName()
  name: string;

  @Field(() => CheckStatus)
  status: CheckStatus;

  @Field(() => String, { nullable: true, description: 'Up to 1,024 characters.' })
  @IsOptional()
  @Length(1, 1024, { message: '$property must be 1 to 1024 characters long' })
  summary?: string | null;

  @Field(() => String, { nullable: true, description: 'http(s), up to 2,048 characters.' })
  @IsOptional()
  @Length(1, 2048, { message: '$property must be 1 to 2048 characters long' })
  @IsUrl(
    { protocols: ['http', 'https'], require_protocol: true, require_tld: false },
    { message: '$property must be an http(s) URL' },
  )
  detailsUrl?: string | null;
}
