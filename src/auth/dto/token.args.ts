import { ArgsType, Field, Int } from '@nestjs/graphql';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsEnum,
  IsInt,
  IsOptional,
  Length,
  Matches,
  Max,
  Min,
} from 'class-validator';
import { IsName, NAME_PATTERN } from '../../common/validation.js';
import { Role } from '../../common/role.js';
import { ENVIRONMENT_PATTERN, MAX_ENVIRONMENT_PATTERNS } from '../../common/environment-pattern.js';

/**
 * Any principal's name: the §6 names `issueToken` gives, and the longer names an OIDC rule
 * makes from claims (which may also hold upper case, `:`, `/` and `@`, up to 255 characters).
 */
export const PRINCIPAL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$/;

const IsPrincipalName = () =>
  Matches(PRINCIPAL_NAME_PATTERN, {
    message: '$property must be a principal name (^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$)',
  });

/** The longest token lifetime `issueToken` accepts: one year. */
export const MAX_EXPIRES_IN_SECONDS = 31_536_000;

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

  @Field(() => [String], { nullable: true })
  @IsEnvironmentPatterns()
  environments?: string[] | null;

  @Field(() => Int, { nullable: true })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MAX_EXPIRES_IN_SECONDS)
  expiresInSeconds?: number | null;
}

@ArgsType()
export class RevokeTokenArgs {
  @Field()
  @IsPrincipalName()
  name: string;
}

@ArgsType()
export class RotateTokenArgs {
  @Field()
  @IsPrincipalName()
  name: string;
}

@ArgsType()
export class ExchangeOidcTokenArgs {
  @Field()
  @Length(1, 16_384)
  token: string;
}

/** docs/design.md §6: group names like environment names, 0–20 per principal. */
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

/** R26: 1–20 environment name patterns (`*` matches any run of characters); null: all environments. */
export function IsEnvironmentPatterns() {
  return (target: object, property: string) => {
    IsOptional()(target, property);
    ArrayMinSize(1, { message: '$property must hold at least 1 pattern (omit it for all)' })(
      target,
      property,
    );
    ArrayMaxSize(MAX_ENVIRONMENT_PATTERNS, {
      message: `$property must hold at most ${MAX_ENVIRONMENT_PATTERNS} patterns`,
    })(target, property);
    Matches(ENVIRONMENT_PATTERN, {
      each: true,
      message: '$property must be name patterns matching ^[a-z0-9*][a-z0-9._*-]{0,62}$',
    })(target, property);
  };
}

@ArgsType()
export class SetPrincipalGroupsArgs {
  @Field()
  @IsPrincipalName()
  name: string;

  @Field(() => [String])
  @IsGroups()
  groups: string[];
}
