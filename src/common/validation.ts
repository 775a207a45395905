import { type ArgumentMetadata, applyDecorators, ValidationPipe } from '@nestjs/common';
import type { ValidationError, ValidatorOptions } from 'class-validator';
import { IsInt, IsOptional, Length, Matches, Max, Min, ValidateBy } from 'class-validator';
import { InputError } from './errors.js';
import { PlanId } from './ids.js';
import { passesAtOnce } from './rules-at-once.js';

/** docs/design.md §6: environment (and principal) names. */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const PLAN_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}@[1-9][0-9]{0,9}\.[1-9][0-9]{0,9}$/;

/** The largest generation, sequence or row id the service accepts: GraphQL Int and SQL integer. */
export const MAX_INT32 = 2 ** 31 - 1;

export const IsName = () =>
  Matches(NAME_PATTERN, { message: '$property must match ^[a-z0-9][a-z0-9._-]{0,62}$' });

/** Whether the generation and sequence of a well-formed plan id are both within 1..2^31-1. */
export function planIdInRange(id: string): boolean {
  const parsed = PlanId.parse(id);
  return (
    parsed != null &&
    [parsed.generation, parsed.sequence].every((part) => part >= 1 && part <= MAX_INT32)
  );
}

/** `<environment>@<generation>.<sequence>`, generation and sequence each 1..2^31-1. */
export const IsPlanId = () =>
  applyDecorators(
    Matches(PLAN_ID_PATTERN, {
      message: '$property must be a plan id: <environment>@<generation>.<sequence>',
    }),
    ValidateBy({
      name: 'planIdInRange',
      validator: {
        validate: (value: unknown) => typeof value === 'string' && planIdInRange(value),
        defaultMessage: () =>
          `$property must have a generation and a sequence from 1 to ${MAX_INT32}`,
      },
    }),
  );

/** A row id sent as a decimal string (GraphQL ID): 1..2^31-1. */
export const IsRowId = (what: string) =>
  ValidateBy({
    name: 'rowId',
    validator: {
      validate: (value: unknown) =>
        typeof value === 'string' && /^[1-9][0-9]{0,9}$/.test(value) && Number(value) <= MAX_INT32,
      defaultMessage: () => `$property must be ${what} (1 to ${MAX_INT32})`,
    },
  });

/** Keys, instances, titles and reasons: 1–255 characters. */
export const IsShortText = () =>
  Length(1, 255, { message: '$property must be 1 to 255 characters long' });

export const IsOptionalShortText = () => applyDecorators(IsOptional(), IsShortText());

export const IsGeneration = () =>
  applyDecorators(
    IsInt(),
    Min(1, { message: `$property must be a generation (1 to ${MAX_INT32})` }),
    Max(MAX_INT32, { message: `$property must be a generation (1 to ${MAX_INT32})` }),
  );

/** A deployment sequence an environment may have reached: 0..2^31-1. */
export const IsDeploymentSequence = () =>
  applyDecorators(
    IsInt(),
    Min(0, { message: `$property must be a deployment sequence (0 to ${MAX_INT32})` }),
    Max(MAX_INT32, { message: `$property must be a deployment sequence (0 to ${MAX_INT32})` }),
  );

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

/** A NUL character, or a UTF-16 surrogate that is not half of a pair. */
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The path of the first string inside `value` that no database can store as sent: NUL
 * (PostgreSQL text refuses it) or a lone surrogate (not Unicode: stored as U+FFFD, so it
 * would no longer hash to what was sent). Null when every string is well formed.
 */
export function unstorableText(value: unknown, path: string, depth = 0): string | null {
  if (typeof value === 'string') return UNSTORABLE.test(value) ? path : null;
  if (value === null || typeof value !== 'object' || depth > 32) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableText(value[i], `${path}[${i}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [key, inner] of Object.entries(value)) {
    const found = unstorableText(inner, path ? `${path}.${key}` : key, depth + 1);
    if (found) return found;
  }
  return null;
}

function messages(errors: ValidationError[], prefix = ''): string[] {
  return errors.flatMap((error) => [
    ...Object.values(error.constraints ?? {}).map((m) => (prefix ? `${prefix}.${m}` : m)),
    ...messages(error.children ?? [], prefix ? `${prefix}.${error.property}` : error.property),
  ]);
}

/**
 * Validates every argument and input type; a violation is BAD_USER_INPUT naming the field.
 * Before the per-field rules, every string of every argument (titles, content, reasons,
 * keys, instances, names, ids, ...) must be well-formed text without NUL, so that both
 * databases store exactly what was sent.
 */
class PlanfenceValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // Custom parameter decorators (the authenticated principal) are not client input.
    if (metadata.type !== 'custom') {
      const path = unstorableText(value, metadata.data ?? '');
      if (path !== null) {
        throw new InputError(
          'BAD_USER_INPUT',
          `${path || 'argument'} must be well-formed text without NUL characters or lone surrogates`,
        );
      }
    }
    return super.transform(value, metadata);
  }

  /** A valid input is known valid from its class's rules gathered once (rules-at-once.ts). */
  protected override validate(
    object: object,
    options?: ValidatorOptions,
  ): Promise<ValidationError[]> | ValidationError[] {
    return passesAtOnce(object, options) ? [] : super.validate(object, options);
  }
}

export const validationPipe = new PlanfenceValidationPipe({
  transform: true,
  forbidUnknownValues: false,
  exceptionFactory: (errors) => new InputError('BAD_USER_INPUT', messages(errors).join('; ')),
});
