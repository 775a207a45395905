import { ArgsType, Field } from '@nestjs/graphql';
import { IsName } from './validation.js';

@ArgsType()
export class EnvironmentNameArgs {
  @Field()
  @IsName()
  name: string;
}

@ArgsType()
export class EnvironmentArgs {
  @Field()
  @IsName()
  environment: string;
}
