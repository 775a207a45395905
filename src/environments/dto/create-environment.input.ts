import { Field, InputType } from '@nestjs/graphql';
import { IsBoolean, IsEnum } from 'class-validator';
import { IsName } from '../../common/validation.js';
import { FencingMode } from '../environment.entity.js';

@InputType()
export class CreateEnvironmentInput {
  @Field({ description: '^[a-z0-9][a-z0-9._-]{0,62}$' })
  @IsName()
  name: string;

  @Field(() => FencingMode, { defaultValue: FencingMode.MONOTONIC })
  @IsEnum(FencingMode)
  mode: FencingMode;

  @Field({ defaultValue: true })
  @IsBoolean()
  requireApproval: boolean;
}
