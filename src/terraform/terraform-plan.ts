import { TerraformPlanError } from './terraform.errors.js';

/**
 * Deepest nesting of arrays and objects accepted in a plan document. Terraform's own
 * documents stay far below it (nested blocks a dozen levels down); the bound keeps the
 * walks over a hostile document short.
 */
const MAX_TERRAFORM_DEPTH = 64;

/** What replaces a value Terraform marks sensitive (DESIGN R32, R54). */
export const SENSITIVE = '(sensitive)';

export interface TerraformResourceChange {
  address: string;
  type: string;
  actions: string[];
  /** JSON, sensitive values masked; null where Terraform has no value. */
  before: string | null;
  after: string | null;
  /**
   * The top-level attributes whose masked values before and after read the same while the
   * values themselves differ: a changed sensitive value (R54), sorted. Summaries stored
   * before the field existed lack it (read it as []).
   */
  sensitiveChanges: string[];
}

/**
 * A provisioner in the plan's configuration: a command that runs where the plan is applied
 * (`local-exec`), or on the resource (`remote-exec`, `file`). Reviewers see every one.
 */
export interface TerraformProvisioner {
  /** The resource's configuration address, e.g. module.app.terraform_data.build. */
  address: string;
  /** local-exec, remote-exec, file, ... */
  type: string;
  /** local-exec's command as written, masked like every value; null where it is computed. */
  command: string | null;
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
  /**
   * Every provisioner of the configuration (what runs on the applier: local-exec). Summaries
   * stored before the field existed lack it (read it as []).
   */
  provisioners: TerraformProvisioner[];
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
  /** The document with every sensitive value masked (R54): what `masked` is the JSON of. */
  document: TerraformPlanDocument;
  /**
   * The whole document as compact JSON with every sensitive value replaced by "(sensitive)"
   * (R54): what the service stores and hands out as the plan's content. Deterministic and
   * idempotent: `parseTerraformPlan(masked).masked === masked`.
   */
  masked: string;
  summary: TerraformPlanSummary;
  /**
   * The masked `before`/`after` of each entry of `summary.resourceChanges`, as values: what
   * `JSON.parse` of those strings gives, without parsing them again. They share every
   * unchanged part with `document`; nothing here is stored.
   */
  maskedValues: { before: unknown; after: unknown }[];
}

/**
 * What a submit keeps of a parse when no plan policy reads the document: its masked content
 * and its summary. A worker hands back only these, without the document's objects, whose
 * copy to the request thread costs it about as much as parsing the JSON again.
 */
export type MaskedTerraformPlan = Pick<ParsedTerraformPlan, 'masked' | 'summary'>;

type Counted = Exclude<
  keyof TerraformPlanSummary,
  'resourceChanges' | 'provisioners' | 'terraformVersion'
>;

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
 * Validates a Terraform (or OpenTofu) plan in the JSON of `terraform show -json PLANFILE`,
 * masks it (R54, see maskDocument) and computes its summary: the counts per kind of action
 * and the changed resources, their values taken from the masked document, each with the
 * attributes whose sensitive value changes (`sensitiveChanges`, computed from the values as
 * submitted). Pure: the same content always gives the same result. A document that is not
 * such a plan → TerraformPlanError (BAD_USER_INPUT) naming what is wrong.
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
    provisioners: [],
    terraformVersion: terraformVersion ?? null,
  };
  const listed: number[] = [];
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
    if (counted !== 'noop') listed.push(index);
  });

  const document = maskDocument(parsed) as TerraformPlanDocument & Record<string, unknown>;
  const maskedChanges = document.resource_changes as Record<string, unknown>[];
  const maskedValues: ParsedTerraformPlan['maskedValues'] = [];
  for (const index of listed) {
    const entry = changes[index] as Record<string, unknown>;
    const change = entry.change as Record<string, unknown>;
    const maskedChange = maskedChanges[index].change as Record<string, unknown>;
    const before = maskedChange.before ?? null;
    const after = maskedChange.after ?? null;
    summary.resourceChanges.push({
      address: entry.address as string,
      type: entry.type as string,
      actions: change.actions as string[],
      before: before === null ? null : JSON.stringify(before),
      after: after === null ? null : JSON.stringify(after),
      sensitiveChanges: sensitiveChanges(change.before, change.after, before, after),
    });
    maskedValues.push({ before: jsonValue(before), after: jsonValue(after) });
  }
  summary.provisioners = provisionersOf(document.configuration);
  return { document, masked: JSON.stringify(document), summary, maskedValues };
}

/**
 * The provisioners of a (masked) plan's configuration, module by module in the document's
 * order: what runs on the machine that applies it (local-exec) or on the resource.
 */
function provisionersOf(configuration: unknown): TerraformProvisioner[] {
  const found: TerraformProvisioner[] = [];
  const walk = (module: unknown, prefix: string, depth: number): void => {
    if (!isObject(module) || depth > MAX_TERRAFORM_DEPTH) return;
    for (const resource of Array.isArray(module.resources) ? module.resources : []) {
      if (!isObject(resource) || !Array.isArray(resource.provisioners)) continue;
      const address = `${prefix}${typeof resource.address === 'string' ? resource.address : '?'}`;
      for (const provisioner of resource.provisioners) {
        if (!isObject(provisioner)) continue;
        const command = isObject(provisioner.expressions)
          ? provisioner.expressions.command
          : undefined;
        found.push({
          address,
          type: typeof provisioner.type === 'string' ? provisioner.type : '?',
          command:
            isObject(command) && typeof command.constant_value === 'string'
              ? command.constant_value
              : null,
        });
      }
    }
    const calls = isObject(module.module_calls) ? module.module_calls : {};
    for (const [name, call] of Object.entries(calls)) {
      if (isObject(call)) walk(call.module, `${prefix}module.${name}.`, depth + 1);
    }
  };
  if (isObject(configuration)) walk(configuration.root_module, '', 0);
  return found;
}

/**
 * The JSON of `terraform show -json PLANFILE` with every sensitive value replaced by
 * "(sensitive)" (R54): `parseTerraformPlan(content).masked`. Throws as parseTerraformPlan does.
 */
export function maskTerraformPlanJson(content: string): string {
  return parseTerraformPlan(content).masked;
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
 * The top-level attributes of a resource whose masked values before and after read the same
 * but whose values differ: each one a sensitive value that changes. Only where both sides
 * are objects (an update or a replacement); sorted.
 */
function sensitiveChanges(
  rawBefore: unknown,
  rawAfter: unknown,
  before: unknown,
  after: unknown,
): string[] {
  if (!isObject(rawBefore) || !isObject(rawAfter) || !isObject(before) || !isObject(after)) {
    return [];
  }
  const changed: string[] = [];
  for (const key of Object.keys(after)) {
    if (!Object.hasOwn(before, key)) continue;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) continue;
    if (JSON.stringify(rawBefore[key]) !== JSON.stringify(rawAfter[key])) changed.push(key);
  }
  return changed.sort();
}

// ---------------------------------------------------------------------------------------
// Masking the whole document (R54)

/**
 * The plan with every sensitive value replaced by "(sensitive)", in two passes.
 *
 * 1. The values Terraform marks: `before`/`after` of `resource_changes`, `resource_drift`
 *    and `deferred_changes` per `before_sensitive`/`after_sensitive`; `output_changes` per
 *    theirs, whole for an output declared or recorded sensitive; the `values` of each
 *    resource of `planned_values` and `prior_state` per its `sensitive_values`, and their
 *    outputs marked `sensitive`; the `variables` declared sensitive (their values, their
 *    defaults in `configuration`, in child modules the `constant_value` a module call
 *    passes them); the `constant_value` of an output declared sensitive. Every string and
 *    number so replaced is remembered as a secret.
 * 2. Terraform does not carry every mark along (terraform_data's `output` echoes a sensitive
 *    `input` unmarked, whole or inside a longer string): every string or number anywhere in
 *    the document's values that is, or contains, a secret is replaced too. Identifiers are
 *    not values and stay: format and Terraform versions, addresses, modes, types, names,
 *    indexes, providers, actions, action reasons, attribute paths (`replace_paths`,
 *    `relevant_attributes`), references, the sensitivity and unknown-value marks
 *    themselves, the timestamp. Terraform refuses sensitive values in `count`/`for_each`,
 *    so an address holds none.
 *
 * Copies only what changes; deterministic. Idempotent: in a masked document every marked
 * position already reads "(sensitive)", which is never a secret, so nothing more changes.
 */
function maskDocument(plan: Record<string, unknown>): Record<string, unknown> {
  const found = new Set<string>();
  const marked = markedPass(plan, found);
  found.delete('');
  found.delete(SENSITIVE);
  if (found.size === 0) return marked;
  const secrets = new Secrets(found);
  return DOCUMENT(marked, secrets) as Record<string, unknown>;
}

/** `value` with `key` replaced by `change(value[key])`, copied only if it changes. */
function withKey(value: unknown, key: string, change: (member: unknown) => unknown): unknown {
  if (!isObject(value) || !Object.hasOwn(value, key)) return value;
  return withMembers(value, (member, at) => (at === key ? change(member) : member));
}

/** `value` (an object whose members are named, e.g. outputs by name) with each member changed. */
function eachNamed(value: unknown, change: (member: unknown, name: string) => unknown): unknown {
  return isObject(value) ? withMembers(value, (m, k) => change(m, k as string)) : value;
}

/** `value` (an array) with each item changed. */
function eachItem(value: unknown, change: (item: unknown) => unknown): unknown {
  return Array.isArray(value) ? withMembers(value, (item) => change(item)) : value;
}

/** Pass 1: the values Terraform marks sensitive, or declares so, replaced; their strings into `found`. */
function markedPass(plan: Record<string, unknown>, found: Set<string>): Record<string, unknown> {
  const configuration = isObject(plan.configuration) ? plan.configuration : {};
  const rootModule = isObject(configuration.root_module) ? configuration.root_module : {};
  const sensitiveVariables = declaredSensitive(rootModule.variables);
  const sensitiveOutputs = declaredSensitive(rootModule.outputs);
  for (const state of [
    plan.planned_values,
    isObject(plan.prior_state) ? plan.prior_state.values : null,
  ]) {
    if (!isObject(state) || !isObject(state.outputs)) continue;
    for (const [name, output] of Object.entries(state.outputs)) {
      if (isObject(output) && output.sensitive === true) sensitiveOutputs.add(name);
    }
  }
  const whole = (value: unknown) => replaceWhole(value, found);
  const change = (value: unknown) => markChange(value, found);
  const entry = (value: unknown) => withKey(value, 'change', change);
  const state = (value: unknown) => markStateValues(value, found);

  return withMembers(plan, (member, key) => {
    switch (key) {
      case 'variables':
        return eachNamed(member, (variable, name) =>
          sensitiveVariables.has(name) ? withKey(variable, 'value', whole) : variable,
        );
      case 'configuration':
        return withKey(member, 'root_module', (module) => markConfigModule(module, found));
      case 'resource_changes':
      case 'resource_drift':
        return eachItem(member, entry);
      case 'deferred_changes':
        return eachItem(member, (deferred) => withKey(deferred, 'resource_change', entry));
      case 'output_changes':
        return eachNamed(member, (output, name) =>
          sensitiveOutputs.has(name)
            ? withKey(withKey(output, 'before', whole), 'after', whole)
            : change(output),
        );
      case 'planned_values':
        return state(member);
      case 'prior_state':
        return withKey(member, 'values', state);
      default:
        return member;
    }
  }) as Record<string, unknown>;
}

/** The names of the members of `declarations` (variables or outputs by name) marked `sensitive: true`. */
function declaredSensitive(declarations: unknown): Set<string> {
  const names = new Set<string>();
  if (isObject(declarations)) {
    for (const [name, declaration] of Object.entries(declarations)) {
      if (isObject(declaration) && declaration.sensitive === true) names.add(name);
    }
  }
  return names;
}

/** "(sensitive)" for a value (its strings into `found`); null and absent values stay. */
function replaceWhole(value: unknown, found: Set<string>): unknown {
  if (value === null || value === undefined) return value;
  strings(value, found);
  return SENSITIVE;
}

/**
 * A change object (`before`, `after` and their marks) with what the marks mark replaced. Each
 * side is masked by the marks of both: an attribute Terraform marks sensitive on one side
 * only (a value that becomes sensitive, or stops being so) is a secret on the other side too.
 */
function markChange(change: unknown, found: Set<string>): unknown {
  if (!isObject(change)) return change;
  const { before_sensitive: before, after_sensitive: after } = change;
  return withMembers(change, (value, key) =>
    (key === 'before' || key === 'after') && value !== null
      ? markValue(markValue(value, before, found), after, found)
      : value,
  );
}

/** `values` of `planned_values` or `prior_state.values`: outputs, then resources module by module. */
function markStateValues(values: unknown, found: Set<string>): unknown {
  const outputs = (value: unknown) =>
    eachNamed(value, (output) =>
      isObject(output) && output.sensitive === true
        ? withKey(output, 'value', (v) => replaceWhole(v, found))
        : output,
    );
  const resource = (value: unknown) =>
    isObject(value)
      ? withKey(value, 'values', (v) => markValue(v, value.sensitive_values, found))
      : value;
  const module = (value: unknown): unknown =>
    withKey(
      withKey(value, 'resources', (r) => eachItem(r, resource)),
      'child_modules',
      (c) => eachItem(c, module),
    );
  return withKey(withKey(values, 'outputs', outputs), 'root_module', module);
}

/**
 * A module of `configuration`: the defaults of its sensitive variables, the constant value
 * of its sensitive outputs, and in each module call the constant values passed to the called
 * module's sensitive variables; then the called modules themselves.
 */
function markConfigModule(module: unknown, found: Set<string>): unknown {
  if (!isObject(module)) return module;
  const whole = (value: unknown) => replaceWhole(value, found);
  return withMembers(module, (member, key) => {
    switch (key) {
      case 'variables':
        return eachNamed(member, (variable) =>
          isObject(variable) && variable.sensitive === true
            ? withKey(variable, 'default', whole)
            : variable,
        );
      case 'outputs':
        return eachNamed(member, (output) =>
          isObject(output) && output.sensitive === true
            ? withKey(output, 'expression', (e) => withKey(e, 'constant_value', whole))
            : output,
        );
      case 'module_calls':
        return eachNamed(member, (call) => {
          if (!isObject(call)) return call;
          const called = isObject(call.module) ? call.module : {};
          const sensitive = declaredSensitive(called.variables);
          const passed = eachNamed(call.expressions, (expression, name) =>
            sensitive.has(name) ? withKey(expression, 'constant_value', whole) : expression,
          );
          return withMembers(call, (value, at) =>
            at === 'expressions'
              ? passed
              : at === 'module'
                ? markConfigModule(value, found)
                : value,
          );
        });
      default:
        return member;
    }
  });
}

/** Adds every string and number inside `value` to `into`, as text. */
function strings(value: unknown, into: Set<string>, depth = 0): void {
  if (depth > MAX_TERRAFORM_DEPTH) return;
  if (typeof value === 'string') into.add(value);
  else if (typeof value === 'number') into.add(String(value));
  else if (Array.isArray(value)) for (const item of value) strings(item, into, depth + 1);
  else if (isObject(value)) for (const item of Object.values(value)) strings(item, into, depth + 1);
}

/**
 * Terraform's sensitivity marks mirror the value: `true` marks the whole value; an object or
 * array marks its members, position by position; anything else marks nothing. What a mark
 * replaces goes into `found`. Copies only what changes.
 */
function markValue(value: unknown, marks: unknown, found: Set<string>): unknown {
  if (marks === true) {
    strings(value, found);
    return SENSITIVE;
  }
  if (typeof value !== 'object' || value === null) return value;
  if (typeof marks !== 'object' || marks === null) return value;
  const itemMarks: unknown[] | null = Array.isArray(marks) ? marks : null;
  const keyMarks = isObject(marks) ? marks : null;
  return withMembers(value, (item, key) => {
    const mark: unknown =
      typeof key === 'number'
        ? itemMarks?.[key]
        : keyMarks && Object.hasOwn(keyMarks, key)
          ? keyMarks[key]
          : undefined;
    return mark === undefined || mark === false ? item : markValue(item, mark, found);
  });
}

/**
 * The sensitive values found in pass 1, for pass 2: does a text contain one of them (or is
 * it one)? An Aho–Corasick automaton over UTF-16 code units: one pass over each text
 * whatever the number of secrets, so masking stays linear in the document's size. Nodes are
 * kept in typed arrays (first child, next sibling), the root's children in a table.
 */
class Secrets {
  private readonly rootChild = new Int32Array(0x10000);
  private readonly firstChild: Int32Array;
  private readonly nextSibling: Int32Array;
  private readonly code: Uint16Array;
  private readonly fail: Int32Array;
  /** 1 where a secret ends at the node, or at a node its fail links lead to. */
  private readonly ends: Uint8Array;
  private nodes = 1;

  constructor(found: Set<string>) {
    let capacity = 1;
    for (const secret of found) capacity += secret.length;
    this.firstChild = new Int32Array(capacity).fill(-1);
    this.nextSibling = new Int32Array(capacity).fill(-1);
    this.code = new Uint16Array(capacity);
    this.fail = new Int32Array(capacity);
    this.ends = new Uint8Array(capacity);
    for (const secret of found) this.add(secret);
    this.link();
  }

  reveals(text: string): boolean {
    let state = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      for (;;) {
        const next = this.child(state, c);
        if (next !== -1) {
          state = next;
          break;
        }
        if (state === 0) break;
        state = this.fail[state];
      }
      if (this.ends[state]) return true;
    }
    return false;
  }

  /** The child of `node` by code unit `c`, or -1. */
  private child(node: number, c: number): number {
    if (node === 0) return this.rootChild[c] || -1;
    for (let n = this.firstChild[node]; n !== -1; n = this.nextSibling[n]) {
      if (this.code[n] === c) return n;
    }
    return -1;
  }

  private add(secret: string): void {
    let node = 0;
    for (let i = 0; i < secret.length; i++) {
      const c = secret.charCodeAt(i);
      let next = this.child(node, c);
      if (next === -1) {
        next = this.nodes++;
        this.code[next] = c;
        if (node === 0) this.rootChild[c] = next;
        else {
          this.nextSibling[next] = this.firstChild[node];
          this.firstChild[node] = next;
        }
      }
      node = next;
    }
    this.ends[node] = 1;
  }

  /** Fail links, breadth first: each node's longest proper suffix that is a node too. */
  private link(): void {
    const queue = new Int32Array(this.nodes);
    let head = 0;
    let tail = 0;
    for (let c = 0; c < 0x10000; c++) if (this.rootChild[c]) queue[tail++] = this.rootChild[c];
    while (head < tail) {
      const node = queue[head++];
      for (let n = this.firstChild[node]; n !== -1; n = this.nextSibling[n]) {
        const c = this.code[n];
        let f = this.fail[node];
        let target = this.child(f, c);
        while (target === -1 && f !== 0) {
          f = this.fail[f];
          target = this.child(f, c);
        }
        this.fail[n] = target === -1 ? 0 : target;
        this.ends[n] |= this.ends[this.fail[n]];
        queue[tail++] = n;
      }
    }
  }
}

/** Pass 2 over a value: every string or number that is, or contains, a secret replaced. */
function sweep(value: unknown, secrets: Secrets): unknown {
  if (typeof value === 'string') return secrets.reveals(value) ? SENSITIVE : value;
  if (typeof value === 'number') return secrets.reveals(String(value)) ? SENSITIVE : value;
  if (typeof value !== 'object' || value === null) return value;
  return withMembers(value, (member) => sweep(member, secrets));
}

/**
 * How pass 2 walks one part of the document: 'value' sweeps it all, 'keep' leaves it (an
 * identifier, or marks), a function walks it as that part.
 */
type WalkFn = (value: unknown, secrets: Secrets) => unknown;
type Walk = 'value' | 'keep' | WalkFn;

function walk(how: Walk, value: unknown, secrets: Secrets): unknown {
  if (how === 'keep') return value;
  if (how === 'value') return sweep(value, secrets);
  return how(value, secrets);
}

/** An object whose named members are walked as `fields` says, any other member as a value. */
function fields(spec: Record<string, Walk>): WalkFn {
  return (value, secrets) =>
    isObject(value)
      ? withMembers(value, (member, key) =>
          walk(Object.hasOwn(spec, key) ? spec[key as string] : 'value', member, secrets),
        )
      : sweep(value, secrets);
}

/** An array whose items are each walked as `item`. */
function items(item: Walk): WalkFn {
  return (value, secrets) =>
    Array.isArray(value)
      ? withMembers(value, (member) => walk(item, member, secrets))
      : sweep(value, secrets);
}

/** An object of members by name (outputs, variables, module calls) each walked as `member`. */
function named(member: Walk): WalkFn {
  return (value, secrets) =>
    isObject(value) ? withMembers(value, (m) => walk(member, m, secrets)) : sweep(value, secrets);
}

/** Lazily: for the parts that contain themselves (modules). */
function later(get: () => Walk): WalkFn {
  return (value, secrets) => walk(get(), value, secrets);
}

const keep = (...names: string[]): Record<string, Walk> =>
  Object.fromEntries(names.map((name): [string, Walk] => [name, 'keep']));

/**
 * Expressions of `configuration`: `constant_value` is a value; `references` (a list of
 * addresses) is kept; nested blocks are arrays of expressions.
 */
const EXPRESSIONS: WalkFn = (value, secrets) => {
  if (Array.isArray(value)) return withMembers(value, (item) => EXPRESSIONS(item, secrets));
  if (!isObject(value)) return sweep(value, secrets);
  return withMembers(value, (member, key) =>
    key === 'constant_value'
      ? sweep(member, secrets)
      : key === 'references' && Array.isArray(member) && member.every((r) => typeof r === 'string')
        ? member
        : EXPRESSIONS(member, secrets),
  );
};

const CHANGE = fields({
  ...keep('actions', 'replace_paths', 'before_sensitive', 'after_sensitive', 'after_unknown'),
});

const IDENTITY = keep(
  'address',
  'previous_address',
  'module_address',
  'mode',
  'type',
  'name',
  'index',
  'provider_name',
  'deposed',
  'action_reason',
);

const RESOURCE_CHANGE = fields({ ...IDENTITY, change: CHANGE });

const STATE_MODULE: Walk = fields({
  address: 'keep',
  resources: items(
    fields({ ...IDENTITY, ...keep('schema_version', 'sensitive_values', 'depends_on') }),
  ),
  child_modules: items(later(() => STATE_MODULE)),
});

const STATE_VALUES = fields({
  outputs: named(fields(keep('sensitive', 'type'))),
  root_module: STATE_MODULE,
});

const CONFIG_MODULE: Walk = fields({
  outputs: named(fields({ ...keep('sensitive', 'depends_on'), expression: EXPRESSIONS })),
  resources: items(
    fields({
      ...keep(
        'address',
        'mode',
        'type',
        'name',
        'provider_config_key',
        'schema_version',
        'depends_on',
      ),
      expressions: EXPRESSIONS,
      count_expression: EXPRESSIONS,
      for_each_expression: EXPRESSIONS,
      provisioners: items(fields({ type: 'keep', expressions: EXPRESSIONS })),
    }),
  ),
  module_calls: named(
    fields({
      ...keep('source', 'version_constraint', 'depends_on'),
      expressions: EXPRESSIONS,
      count_expression: EXPRESSIONS,
      for_each_expression: EXPRESSIONS,
      module: later(() => CONFIG_MODULE),
    }),
  ),
  variables: named(fields(keep('sensitive', 'nullable'))),
});

const CHECK_ADDRESSES: Walk = fields({
  ...keep('address', 'status'),
  instances: items(fields(keep('address', 'status'))),
});

/** Pass 2 over the whole document. */
const DOCUMENT = fields({
  ...keep(
    'format_version',
    'terraform_version',
    'timestamp',
    'applyable',
    'complete',
    'errored',
    'relevant_attributes',
  ),
  variables: 'value',
  planned_values: STATE_VALUES,
  prior_state: fields({ ...keep('format_version', 'terraform_version'), values: STATE_VALUES }),
  resource_changes: items(RESOURCE_CHANGE),
  resource_drift: items(RESOURCE_CHANGE),
  deferred_changes: items(fields({ reason: 'keep', resource_change: RESOURCE_CHANGE })),
  output_changes: named(CHANGE),
  configuration: fields({
    provider_config: named(
      fields({
        ...keep('name', 'full_name', 'alias', 'module_address', 'version_constraint'),
        expressions: EXPRESSIONS,
      }),
    ),
    root_module: CONFIG_MODULE,
  }),
  checks: items(CHECK_ADDRESSES),
});

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
