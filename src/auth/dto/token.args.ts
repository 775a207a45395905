import { ArgsType, Field } from '@nestjs/graphql';
import { IsEnum } from 'class-validator';
import { IsName } from '../../common/validation.js';
import { Role } from '../principal.entity.js';

@ArgsType()
export class IssueTokenArgs {
  @Field()
  @IsName()
  name: string;

  @Field(() => Role)
  @IsEnum(Role)
  role: Role;
}

@ArgsType()
export class RevokeTokenArgs {
  @Field()
  @IsName()
  name: string;
}
