import { Field, InputType, Int } from '@nestjs/graphql';
import {
  IsGeneration,
  IsName,
  IsOptionalShortText,
  IsTtlSeconds,
} from '../../common/validation.js';

@InputType()
export class AcquireLeaseInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int, { defaultValue: 30, description: '1..3600' })
  @IsTtlSeconds()
  ttlSeconds: number;

  @Field(() => String, {
    nullable: true,
    description: 'Optional label of the worker process; the holder becomes principal/instance.',
  })
  @IsOptionalShortText()
  instance?: string | null;
}

@InputType()
export class RenewLeaseInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int)
  @IsGeneration()
  generation: number;

  @Field(() => Int, { defaultValue: 30 })
  @IsTtlSeconds()
  ttlSeconds: number;
}

@InputType()
export class ReleaseLeaseInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int)
  @IsGeneration()
  generation: number;
}
