import { applyDecorators, ValidationPipe } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import { IsInt, IsOptional, Length, Matches, Max, Min } from 'class-validator';
import { InputError } from './errors.js';

/** DESIGN §6: environment (and principal) names. */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const PLAN_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}@[1-9][0-9]{0,9}\.[1-9][0-9]{0,9}$/;

export const IsName = () =>
  Matches(NAME_PATTERN, { message: '$property must match ^[a-z0-9][a-z0-9._-]{0,62}$' });

export const IsPlanId = () =>
  Matches(PLAN_ID_PATTERN, {
    message: '$property must be a plan id: <environment>@<generation>.<sequence>',
  });

/** Keys, instances, titles and reasons: 1–255 characters. */
export const IsShortText = () =>
  Length(1, 255, { message: '$property must be 1 to 255 characters long' });

export const IsOptionalShortText = () => applyDecorators(IsOptional(), IsShortText());

export const IsGeneration = () =>
  applyDecorators(IsInt(), Min(1, { message: '$property must be a generation (>= 1)' }));

export const IsTtlSeconds = () =>
  applyDecorators(
    IsInt(),
    Min(1, { message: '$property must be 1 to 3600' }),
    Max(3600, { message: '$property must be 1 to 3600' }),
  );

export const IsPageSize = () =>
  applyDecorators(
    IsInt(),
    Min(1, { message: '$property must be 1 to 500' }),
    Max(500, { message: '$property must be 1 to 500' }),
  );

function messages(errors: ValidationError[], prefix = ''): string[] {
  return errors.flatMap((error) => [
    ...Object.values(error.constraints ?? {}).map((m) => (prefix ? `${prefix}.${m}` : m)),
    ...messages(error.children ?? [], prefix ? `${prefix}.${error.property}` : error.property),
  ]);
}

/** Validates every argument and input type; a violation is BAD_USER_INPUT naming the field. */
export const validationPipe = new ValidationPipe({
  transform: true,
  forbidUnknownValues: false,
  exceptionFactory: (errors) => new InputError('BAD_USER_INPUT', messages(errors).join('; ')),
});
