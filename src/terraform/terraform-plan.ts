import { TerraformPlanError } from './terraform.errors.js';

/**
 * Deepest nesting of arrays and objects accepted in a plan document. Terraform's own
 * documents stay far below it (nested blocks a dozen levels down); the bound keeps the
 * walks over a hostile document short.
 */
const MAX_TERRAFORM_DEPTH = 64;

/** What replaces a value Terraform marks sensitive (DESIGN R32). */
const SENSITIVE = '(sensitive)';

export interface TerraformResourceChange {
  address: string;
  type: string;
  actions: string[];
  /** JSON, sensitive values masked; null where Terraform has no value. */
  before: string | null;
  after: string | null;
}

export interface TerraformPlanSummary {
  add: number;
  change: number;
  destroy: number;
  replace: number;
  read: number;
  noop: number;
  /** Every resource whose actions are not ["no-op"], in the document's order. */
  resourceChanges: TerraformResourceChange[];
  terraformVersion: string | null;
}

/** The parts of `terraform show -json PLANFILE` the service reads; the rest stays as submitted. */
export interface TerraformPlanDocument {
  format_version: string;
  terraform_version?: string;
  resource_changes?: {
    address: string;
    type: string;
    mode?: string;
    change: {
      actions: string[];
      before?: unknown;
      after?: unknown;
      before_sensitive?: unknown;
      after_sensitive?: unknown;
    };
  }[];
  [key: string]: unknown;
}

export interface ParsedTerraformPlan {
  document: TerraformPlanDocument;
  summary: TerraformPlanSummary;
  /**
   * The masked `before`/`after` of each entry of `summary.resourceChanges`, as values: what
   * `JSON.parse` of those strings gives, without parsing them again. They share every
   * unmasked part with `document`; nothing here is stored.
   */
  maskedValues: { before: unknown; after: unknown }[];
}

type Counted = Exclude<keyof TerraformPlanSummary, 'resourceChanges' | 'terraformVersion'>;

/** Terraform's action lists (plans format 1.x) and the count each adds to. */
const ACTIONS: Record<string, Counted | null> = {
  'no-op': 'noop',
  create: 'add',
  read: 'read',
  update: 'change',
  delete: 'destroy',
  'delete,create': 'replace',
  'create,delete': 'replace',
  // Removed from state without being destroyed (`removed` blocks): listed, counted nowhere.
  forget: null,
  'create,forget': null,
};

/**
 * Validates a Terraform (or OpenTofu) plan in the JSON of `terraform show -json PLANFILE`
 * and computes its summary: the counts per kind of action and the changed resources, with
 * every value Terraform marks sensitive (`before_sensitive`/`after_sensitive`), and every
 * value of a variable declared sensitive wherever it appears, replaced by "(sensitive)". Pure: the same content always gives the same result. A document that is
 * not such a plan → TerraformPlanError (BAD_USER_INPUT) naming what is wrong.
 */
export function parseTerraformPlan(content: string): ParsedTerraformPlan {
  checkDepth(content);
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch (error) {
    throw new TerraformPlanError(
      `a TERRAFORM_PLAN_JSON plan must be JSON (terraform show -json PLANFILE): ${(error as Error).message}`,
    );
  }
  if (!isObject(parsed)) {
    throw new TerraformPlanError(
      'a TERRAFORM_PLAN_JSON plan must be a JSON object (terraform show -json PLANFILE)',
    );
  }
  const version = parsed.format_version;
  if (typeof version !== 'string' || !/^\d+\.\d+$/.test(version)) {
    throw new TerraformPlanError(
      'format_version must be a string like "1.2" (is this the output of terraform show -json PLANFILE?)',
    );
  }
  if (!version.startsWith('1.')) {
    throw new TerraformPlanError(`format_version ${version} is not supported (1.x is)`);
  }
  const terraformVersion = parsed.terraform_version;
  if (terraformVersion !== undefined && typeof terraformVersion !== 'string') {
    throw new TerraformPlanError('terraform_version must be a string');
  }
  const changes = parsed.resource_changes ?? [];
  if (!Array.isArray(changes)) throw new TerraformPlanError('resource_changes must be an array');

  const summary: TerraformPlanSummary = {
    add: 0,
    change: 0,
    destroy: 0,
    replace: 0,
    read: 0,
    noop: 0,
    resourceChanges: [],
    terraformVersion: terraformVersion ?? null,
  };
  const secrets = sensitiveValues(parsed);
  const maskedValues: ParsedTerraformPlan['maskedValues'] = [];
  changes.forEach((entry: unknown, index) => {
    const at = `resource_changes[${index}]`;
    if (!isObject(entry)) throw new TerraformPlanError(`${at} must be an object`);
    for (const field of ['address', 'type'] as const) {
      if (typeof entry[field] !== 'string' || entry[field] === '') {
        throw new TerraformPlanError(`${at}.${field} must be a non-empty string`);
      }
    }
    const change = entry.change;
    if (!isObject(change)) throw new TerraformPlanError(`${at}.change must be an object`);
    const actions = change.actions;
    if (!Array.isArray(actions) || !actions.every((action) => typeof action === 'string')) {
      throw new TerraformPlanError(`${at}.change.actions must be an array of strings`);
    }
    const key = actions.join(',');
    if (!(key in ACTIONS)) {
      throw new TerraformPlanError(
        `${at}.change.actions ${JSON.stringify(actions)} is not an action list Terraform writes`,
      );
    }
    const counted = ACTIONS[key];
    if (counted) summary[counted] += 1;
    if (counted === 'noop') return;
    const before = maskedValue(change.before, change.before_sensitive, secrets);
    const after = maskedValue(change.after, change.after_sensitive, secrets);
    summary.resourceChanges.push({
      address: entry.address as string,
      type: entry.type as string,
      actions,
      before: before === null ? null : JSON.stringify(before),
      after: after === null ? null : JSON.stringify(after),
    });
    maskedValues.push({ before: jsonValue(before), after: jsonValue(after) });
  });
  return { document: parsed as TerraformPlanDocument, summary, maskedValues };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Refuses a document nested deeper than MAX_TERRAFORM_DEPTH before anything parses it: one
 * pass over the text, brackets inside strings skipped.
 */
function checkDepth(content: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < content.length; i++) {
    const c = content.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > MAX_TERRAFORM_DEPTH) {
        throw new TerraformPlanError(
          `the plan nests arrays and objects more than ${MAX_TERRAFORM_DEPTH} levels deep`,
        );
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
}

/**
 * The strings and numbers of the variables declared sensitive (their values and defaults),
 * as text. Terraform does not carry every mark along (terraform_data's `output` echoes a
 * sensitive `input` unmarked in `before_sensitive`, whole or inside a longer string), so a
 * value of `before`/`after` that is one of these, or a string that contains one, is masked
 * besides the positions Terraform marks.
 */
function sensitiveValues(plan: Record<string, unknown>): Set<string> {
  const found = new Set<string>();
  const configuration = isObject(plan.configuration) ? plan.configuration : {};
  const declared = isObject(configuration.root_module) ? configuration.root_module.variables : null;
  const given = isObject(plan.variables) ? plan.variables : {};
  if (isObject(declared)) {
    for (const [name, variable] of Object.entries(declared)) {
      if (!isObject(variable) || variable.sensitive !== true) continue;
      strings(variable.default, found);
      const value = Object.hasOwn(given, name) ? given[name] : null;
      if (isObject(value)) strings(value.value, found);
    }
  }
  found.delete('');
  return found;
}

/** Adds every string and number inside `value` to `into`, as text. */
function strings(value: unknown, into: Set<string>, depth = 0): void {
  if (depth > MAX_TERRAFORM_DEPTH) return;
  if (typeof value === 'string') into.add(value);
  else if (typeof value === 'number') into.add(String(value));
  else if (Array.isArray(value)) for (const item of value) strings(item, into, depth + 1);
  else if (isObject(value)) for (const item of Object.values(value)) strings(item, into, depth + 1);
}

/** `value` with what `marks` marks sensitive, and every sensitive string, replaced; null for no value. */
function maskedValue(value: unknown, marks: unknown, secrets: Set<string>): unknown {
  if (value === undefined || value === null) return null;
  return mask(value, marks, secrets);
}

/**
 * `value` as `JSON.parse(JSON.stringify(value))` gives it back, for a value that came from
 * `JSON.parse`: the same value, except that a -0 reads 0 (the only thing the round trip
 * changes there). Copies only the objects and arrays on the way to a -0.
 */
function jsonValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'number') return Object.is(value, -0) ? 0 : value;
  if (typeof value !== 'object' || value === null || depth > MAX_TERRAFORM_DEPTH) return value;
  return withMembers(value, (item) => jsonValue(item, depth + 1));
}

/**
 * `value` (an array or object) with each member replaced by `change(member, key)`, copied
 * only if one changes; a "__proto__" key stays an own key of the copy.
 */
function withMembers(
  value: object,
  change: (member: unknown, key: string | number) => unknown,
): unknown {
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const changed = change(item, i);
      if (changed !== item) (copy ??= value.slice())[i] = changed;
    }
    return copy ?? value;
  }
  let copy: Record<string, unknown> | null = null;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    const changed = change(item, key);
    if (changed === item) continue;
    copy ??= { ...value };
    Object.defineProperty(copy, key, {
      value: changed,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy ?? value;
}

/** Whether `text` is, or contains, one of the sensitive values. */
function revealsAny(text: string, secrets: Set<string>): boolean {
  if (secrets.has(text)) return true;
  for (const secret of secrets) if (text.includes(secret)) return true;
  return false;
}

/**
 * Terraform's sensitivity marks mirror the value: `true` marks the whole value; an object or
 * array marks its members, position by position; anything else marks nothing. Copies only
 * what changes: an unmarked value without sensitive strings is returned as it is.
 */
function mask(value: unknown, marks: unknown, secrets: Set<string>): unknown {
  if (marks === true) return SENSITIVE;
  if (typeof value === 'string')
    return secrets.size && revealsAny(value, secrets) ? SENSITIVE : value;
  if (typeof value === 'number')
    return secrets.size && secrets.has(String(value)) ? SENSITIVE : value;
  if (typeof value !== 'object' || value === null) return value;
  const marked = typeof marks === 'object' && marks !== null;
  if (!marked && secrets.size === 0) return value;
  const itemMarks = Array.isArray(marks) ? marks : null;
  const keyMarks = isObject(marks) ? marks : null;
  return withMembers(value, (item, key) =>
    mask(
      item,
      typeof key === 'number'
        ? itemMarks?.[key]
        : keyMarks && Object.hasOwn(keyMarks, key)
          ? keyMarks[key]
          : undefined,
      secrets,
    ),
  );
}
