/**
 * R55: the applier applies only what was reviewed. Before `terraform apply` it renders the
 * plan file with `terraform show -json`, and this module compares that rendering with the
 * reviewed plan's content. Imported by the command line: it depends on nothing but the plan
 * parser and its errors.
 */
import { parseTerraformPlan, type TerraformPlanDocument } from './terraform-plan.js';
import { TerraformPlanError } from './terraform.errors.js';

/** Lines returned at most before "… and N more". */
const MAX_LINES = 20;

/** Characters of a value shown in a line at most. */
const MAX_SHOWN = 60;

/** Value paths collected per field at most: enough to name the first and count a few. */
const MAX_PATHS = 100;

const REVIEWED = 'reviewed';
const RENDERED = 'in the plan file';

/**
 * What differs between the reviewed plan and the plan file about to be applied, one short
 * line each ("terraform_data.app: actions ["update"] reviewed, ["delete"] in the plan
 * file"), at most 20 lines then "… and N more"; [] when they agree.
 *
 * Both are `terraform show -json` documents: `reviewedContent` the plan's stored content,
 * `renderedContent` the rendering of the plan file. Both are masked (R54) before anything is
 * compared (idempotent for a document masked already), so no line holds a sensitive value.
 * Compared: `resource_changes` by address (and deposed key), in any order — mode, type,
 * name, provider, previous address, actions, before, after, after_unknown, replace_paths,
 * importing, action_reason; `output_changes` by name — actions, before, after,
 * after_unknown; `variables` by name — their values; `configuration`, whole: what the
 * apply runs besides the changes (provisioners, provider blocks, the expressions of values
 * known only after apply), the first path that differs. Not compared: what two renderings
 * of one plan file may write differently (format_version, terraform_version, timestamp,
 * applyable, complete, errored) and what follows from the compared parts (planned_values,
 * prior_state, …). A document that is not a Terraform plan is one line.
 */
export function reviewedPlanDifferences(
  reviewedContent: string,
  renderedContent: string,
): string[] {
  const reviewed = maskedDocument(reviewedContent);
  const rendered = maskedDocument(renderedContent);
  if (!reviewed || !rendered) {
    return [
      !reviewed
        ? 'the reviewed plan is not a Terraform plan (terraform show -json PLANFILE)'
        : 'the plan file does not render as a Terraform plan (terraform show -json PLANFILE)',
    ];
  }
  const lines = [
    ...resourceDifferences(reviewed, rendered),
    ...outputDifferences(reviewed, rendered),
    ...variableDifferences(reviewed, rendered),
    ...fieldDifferences('configuration', '', reviewed.configuration, rendered.configuration, true),
  ];
  if (lines.length <= MAX_LINES) return lines;
  return [...lines.slice(0, MAX_LINES), `… and ${lines.length - MAX_LINES} more`];
}

/**
 * The masked document, or null for content that is not a Terraform plan. The parser's
 * message is not kept: for JSON that does not parse it quotes the text, which may be raw.
 */
function maskedDocument(content: string): TerraformPlanDocument | null {
  try {
    return parseTerraformPlan(content).document;
  } catch (error) {
    if (error instanceof TerraformPlanError) return null;
    throw error;
  }
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The members of `value` by name, or none. */
function members(value: unknown): Map<string, Json> {
  const found = new Map<string, Json>();
  if (isObject(value)) {
    for (const [name, member] of Object.entries(value)) {
      found.set(name, isObject(member) ? member : { value: member });
    }
  }
  return found;
}

/** Resource changes by address, a deposed object's with its key; a repeated one numbered. */
function resourcesByKey(document: TerraformPlanDocument): Map<string, Json> {
  const found = new Map<string, Json>();
  const entries: unknown[] = Array.isArray(document.resource_changes)
    ? document.resource_changes
    : [];
  for (const entry of entries) {
    if (!isObject(entry)) continue;
    const deposed = typeof entry.deposed === 'string' ? ` (deposed object ${entry.deposed})` : '';
    const base = `${String(entry.address)}${deposed}`;
    let key = base;
    for (let n = 2; found.has(key); n++) key = `${base} #${n}`;
    found.set(key, entry);
  }
  return found;
}

/** The fields of a resource change compared, where they are, and how a line names them. */
const RESOURCE_FIELDS: [label: string, inChange: boolean, field: string, values: boolean][] = [
  ['mode', false, 'mode', false],
  ['type', false, 'type', false],
  ['name', false, 'name', false],
  ['provider', false, 'provider_name', false],
  ['previous address', false, 'previous_address', false],
  ['actions', true, 'actions', false],
  ['action_reason', false, 'action_reason', false],
  ['replace_paths', true, 'replace_paths', false],
  ['importing', true, 'importing', false],
  ['before', true, 'before', true],
  ['after', true, 'after', true],
  ['after_unknown', true, 'after_unknown', true],
];

function resourceDifferences(
  reviewed: TerraformPlanDocument,
  rendered: TerraformPlanDocument,
): string[] {
  const lines: string[] = [];
  const inRendered = resourcesByKey(rendered);
  const inReviewed = resourcesByKey(reviewed);
  for (const [key, was] of inReviewed) {
    const is = inRendered.get(key);
    if (!is) {
      lines.push(`resource ${key} is in the reviewed plan but not in the plan file`);
      continue;
    }
    const wasChange = isObject(was.change) ? was.change : {};
    const isChange = isObject(is.change) ? is.change : {};
    for (const [label, inChange, field, values] of RESOURCE_FIELDS) {
      const a = inChange ? wasChange[field] : was[field];
      const b = inChange ? isChange[field] : is[field];
      lines.push(...fieldDifferences(key, label, a, b, values));
    }
  }
  for (const key of inRendered.keys()) {
    if (!inReviewed.has(key)) {
      lines.push(`resource ${key} is in the plan file but not in the reviewed plan`);
    }
  }
  return lines;
}

const OUTPUT_FIELDS: [field: string, values: boolean][] = [
  ['actions', false],
  ['before', true],
  ['after', true],
  ['after_unknown', true],
];

function outputDifferences(
  reviewed: TerraformPlanDocument,
  rendered: TerraformPlanDocument,
): string[] {
  const lines: string[] = [];
  const inReviewed = members(reviewed.output_changes);
  const inRendered = members(rendered.output_changes);
  for (const [name, was] of inReviewed) {
    const is = inRendered.get(name);
    if (!is) {
      lines.push(`output ${name} is in the reviewed plan but not in the plan file`);
      continue;
    }
    for (const [field, values] of OUTPUT_FIELDS) {
      lines.push(...fieldDifferences(`output ${name}`, field, was[field], is[field], values));
    }
  }
  for (const name of inRendered.keys()) {
    if (!inReviewed.has(name)) {
      lines.push(`output ${name} is in the plan file but not in the reviewed plan`);
    }
  }
  return lines;
}

function variableDifferences(
  reviewed: TerraformPlanDocument,
  rendered: TerraformPlanDocument,
): string[] {
  const lines: string[] = [];
  const inReviewed = members(reviewed.variables);
  const inRendered = members(rendered.variables);
  for (const [name, was] of inReviewed) {
    const is = inRendered.get(name);
    if (!is) {
      lines.push(`variable ${name} is in the reviewed plan but not in the plan file`);
    } else if (!same(was.value, is.value)) {
      lines.push(`variable ${name}: ${show(was.value)} ${REVIEWED}, ${show(is.value)} ${RENDERED}`);
    }
  }
  for (const name of inRendered.keys()) {
    if (!inReviewed.has(name)) {
      lines.push(`variable ${name} is in the plan file but not in the reviewed plan`);
    }
  }
  return lines;
}

/**
 * The line for one field of `subject` whose values differ, or none. A value field (before,
 * after, after_unknown) names the first path that differs and counts the others.
 */
function fieldDifferences(
  subject: string,
  label: string,
  a: unknown,
  b: unknown,
  values: boolean,
): string[] {
  if (same(a, b)) return [];
  if (!values) return [`${subject}: ${label} ${show(a)} ${REVIEWED}, ${show(b)} ${RENDERED}`];
  const paths: Difference[] = [];
  differingPaths(a, b, '', paths);
  const [first] = paths;
  const more =
    paths.length > 1
      ? ` (and ${paths.length >= MAX_PATHS ? `${MAX_PATHS - 1}+` : paths.length - 1} more in ${label})`
      : '';
  return [
    `${subject}: ${label}${first.path} ${show(first.a)} ${REVIEWED}, ${show(first.b)} ${RENDERED}${more}`,
  ];
}

interface Difference {
  path: string;
  a: unknown;
  b: unknown;
}

/** The paths (".input", "[2]", "[\"a b\"]") at which `a` and `b` differ, object keys sorted. */
function differingPaths(a: unknown, b: unknown, path: string, into: Difference[]): void {
  if (into.length >= MAX_PATHS || same(a, b)) return;
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const key of keys) {
      const step = /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
      differingPaths(a[key], b[key], path + step, into);
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((item, i) => differingPaths(item, b[i], `${path}[${i}]`, into));
    return;
  }
  into.push({ path, a, b });
}

/** Whether `a` and `b` are the same JSON value, whatever the order of their objects' keys. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => same(item, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && same(a[key], b[key]));
}

/** JSON with object keys sorted: the same for equal values whatever their keys' order. */
function canonical(value: unknown): string {
  if (value === undefined) return 'undefined';
  return JSON.stringify(value, (_, member: unknown) =>
    isObject(member)
      ? Object.fromEntries(
          Object.keys(member)
            .sort()
            .map((key) => [key, member[key]]),
        )
      : member,
  );
}

/** A value as a line shows it: its JSON cut at MAX_SHOWN characters, "none" when absent. */
function show(value: unknown): string {
  if (value === undefined) return 'none';
  const text = canonical(value);
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
