import {
  getMetadataStorage,
  type MetadataStorage,
  type ValidationArguments,
  ValidationTypes,
  type ValidatorConstraintInterface,
  type ValidatorOptions,
} from 'class-validator';

/**
 * An input class's rules, gathered once per class from class-validator's own metadata, to say
 * of a valid input that it is valid without class-validator's walk (which looks the class's
 * rules up again, groups them by property and builds an error object for every property of
 * every input, valid or not).
 *
 * It only ever says "valid": it runs the same validator functions, with the same arguments,
 * in the same conditions (`@IsOptional`, `validateIf`) as class-validator does, and passes an
 * input only when each of them answers true at once. Anything else (a rule that fails, a
 * validator that answers later) leaves the input to class-validator, which then writes the
 * errors a client reads. A class with rules this does not run itself (nested inputs, `each`,
 * asynchronous validators, promises) is always left to class-validator.
 */
type Check = (object: object) => boolean;

type ValidationMetadata = ReturnType<MetadataStorage['getTargetValidationMetadatas']>[number];

/** One property's rules: the conditions that skip it, then the validators it must pass. */
interface PropertyRules {
  property: string;
  conditions: ((object: object, value: unknown) => boolean)[];
  validators: {
    metadata: ValidationMetadata;
    instance: ValidatorConstraintInterface;
  }[];
}

const checks = new WeakMap<object, Check | null>();

/**
 * The validator options under which a class's check gives class-validator's answer: those
 * that change only how errors are written, not whether there are any.
 */
const NEUTRAL_OPTIONS = new Set([
  'forbidUnknownValues',
  'validationError',
  'enableDebugMessages',
  'dismissDefaultMessages',
  'stopAtFirstError',
]);

/**
 * True when class-validator would find no error in `object` (an instance of its input class)
 * under `options`; false when that is not known without it.
 */
export function passesAtOnce(object: object, options: ValidatorOptions | undefined): boolean {
  if (options && Object.keys(options).some((key) => !NEUTRAL_OPTIONS.has(key))) return false;
  const target = object.constructor as (new () => object) | undefined;
  if (typeof target !== 'function') return false;
  let check = checks.get(target);
  if (check === undefined) checks.set(target, (check = compile(target)));
  return check !== null && check(object);
}

function compile(target: new () => object): Check | null {
  const storage = getMetadataStorage();
  // The arguments class-validator's `validate(object, options)` looks an object's rules up with.
  const metadatas = storage.getTargetValidationMetadatas(
    target,
    undefined as unknown as string,
    false,
    false,
    undefined,
  );
  // Without rules, class-validator's answer depends on forbidUnknownValues: left to it.
  if (!metadatas.length) return null;
  const properties: PropertyRules[] = [];
  for (const [property, rules] of Object.entries(storage.groupByPropertyName(metadatas))) {
    const found: PropertyRules = { property, conditions: [], validators: [] };
    for (const metadata of rules) {
      switch (metadata.type) {
        case ValidationTypes.CONDITIONAL_VALIDATION:
          found.conditions.push(
            metadata.constraints[0] as (object: object, value: unknown) => boolean,
          );
          break;
        case ValidationTypes.IS_DEFINED:
        case ValidationTypes.CUSTOM_VALIDATION: {
          if (metadata.each) return null;
          for (const constraint of storage.getTargetValidatorConstraints(metadata.constraintCls)) {
            if (constraint.async) return null;
            found.validators.push({ metadata, instance: constraint.instance });
          }
          break;
        }
        case ValidationTypes.WHITELIST:
          // Read by the whitelist option only, which leaves the class to class-validator.
          break;
        default:
          return null;
      }
    }
    properties.push(found);
  }
  return (object) => properties.every((rules) => passes(object, rules));
}

function passes(object: object, { property, conditions, validators }: PropertyRules): boolean {
  const value = (object as Record<string, unknown>)[property];
  // class-validator reads a promise here only for rules of promises, which it is left.
  if (value instanceof Promise) return false;
  if (!conditions.every((condition) => condition(object, value))) return true;
  for (const { metadata, instance } of validators) {
    if (metadata.validateIf && !metadata.validateIf(object, value)) continue;
    const args: ValidationArguments = {
      targetName: object.constructor.name,
      property: metadata.propertyName,
      object,
      value,
      constraints: metadata.constraints,
    };
    const answer: unknown = instance.validate(value, args);
    // class-validator's tests: falsy fails; a thenable answers later.
    if (!answer || typeof (answer as { then?: unknown }).then === 'function') return false;
  }
  return true;
}
