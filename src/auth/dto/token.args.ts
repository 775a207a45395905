import { ArgsType, Field } from '@nestjs/graphql';
import { ArrayMaxSize, IsEnum, IsOptional } from 'class-validator';
import { IsName, NAME_PATTERN } from '../../common/validation.js';
import { Matches } from 'class-validator';
import { Role } from '../principal.entity.js';

@ArgsType()
export class IssueTokenArgs {
  @Field()
  @IsName()
  name: string;

  @Field(() => Role)
  @IsEnum(Role)
  role: Role;

  @Field(() => [String], { nullable: true })
  @IsGroups()
  groups?: string[] | null;
}

@ArgsType()
export class RevokeTokenArgs {
  @Field()
  @IsName()
  name: string;
}

/** DESIGN §6: group names like environment names, 0–20 per principal. */
function IsGroups() {
  return (target: object, property: string) => {
    IsOptional()(target, property);
    ArrayMaxSize(20, { message: '$property must hold at most 20 groups' })(target, property);
    Matches(NAME_PATTERN, {
      each: true,
      message: '$property must be names matching ^[a-z0-9][a-z0-9._-]{0,62}$',
    })(target, property);
  };
}

@ArgsType()
export class SetPrincipalGroupsArgs {
  @Field()
  @IsName()
  name: string;

  @Field(() => [String])
  @IsGroups()
  groups: string[];
}
