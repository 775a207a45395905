import { type CelType, celEnv } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

/**
 * A static type check of a parsed CEL expression (the AST @bufbuild/cel's parser produces)
 * against the variables a plan policy sees. @bufbuild/cel 0.6 parses and evaluates but its
 * checker covers only constants and identifiers, so the rest is done here, with the
 * overloads of the very function library that evaluates the expression: undeclared
 * variables and functions, unknown fields of `plan`, `summary` and their lists, calls with
 * no matching overload, and an expression that cannot yield a bool are refused when the
 * policy is saved. Anything reached through `terraform` (the parsed document) is `dyn`.
 */

export type CheckedType =
  | { kind: 'dyn' }
  | { kind: 'scalar'; name: string }
  | { kind: 'list'; elem: CheckedType }
  | { kind: 'map'; key: CheckedType; value: CheckedType }
  | { kind: 'record'; name: string; fields: Record<string, CheckedType> }
  | { kind: 'object'; name: string };

const DYN: CheckedType = { kind: 'dyn' };
const scalar = (name: string): CheckedType => ({ kind: 'scalar', name });
const INT = scalar('int');
const BOOL = scalar('bool');
const STRING = scalar('string');
const TYPE = scalar('type');
const listOf = (elem: CheckedType): CheckedType => ({ kind: 'list', elem });

const RESOURCE_CHANGE: CheckedType = {
  kind: 'record',
  name: 'resourceChange',
  fields: { address: STRING, type: STRING, actions: listOf(STRING), before: DYN, after: DYN },
};

const PROVISIONER: CheckedType = {
  kind: 'record',
  name: 'provisioner',
  fields: { address: STRING, type: STRING, command: STRING },
};

/** The variables of a plan policy (DESIGN §16). */
export const POLICY_VARIABLES: Record<string, CheckedType> = {
  plan: {
    kind: 'record',
    name: 'plan',
    fields: {
      environment: STRING,
      generation: INT,
      title: STRING,
      contentType: STRING,
      contentBytes: INT,
      submitter: STRING,
      submitterGroups: listOf(STRING),
      via: STRING,
      sourceRevision: STRING,
    },
  },
  summary: {
    kind: 'record',
    name: 'summary',
    fields: {
      add: INT,
      change: INT,
      destroy: INT,
      replace: INT,
      read: INT,
      noop: INT,
      resourceChanges: listOf(RESOURCE_CHANGE),
      provisioners: listOf(PROVISIONER),
      terraformVersion: STRING,
    },
  },
  terraform: DYN,
};

/** The function library policies are evaluated with: CEL's standard functions and the strings extension. */
export const POLICY_FUNCTIONS = strings;

const TYPE_NAMES = new Set([
  'int',
  'uint',
  'double',
  'bool',
  'string',
  'bytes',
  'list',
  'map',
  'null_type',
  'type',
  'dyn',
]);
const NUMERIC = new Set(['int', 'uint', 'double']);

interface Overload {
  target: CheckedType | undefined;
  args: CheckedType[];
  result: CheckedType;
}

function fromCelType(type: CelType): CheckedType {
  switch (type.kind) {
    case 'list':
      return listOf(fromCelType(type.element));
    case 'map':
      return { kind: 'map', key: fromCelType(type.key), value: fromCelType(type.value) };
    case 'object':
      return { kind: 'object', name: type.name };
    default:
      return type.name === 'dyn' ? DYN : scalar(type.name);
  }
}

let library: Map<string, Overload[]> | undefined;

function overloads(): Map<string, Overload[]> {
  if (library) return library;
  library = new Map();
  for (const func of celEnv({ funcs: POLICY_FUNCTIONS }).funcs) {
    const list = library.get(func.name) ?? [];
    list.push({
      target: func.target && fromCelType(func.target),
      args: func.arguments.map(fromCelType),
      result: fromCelType(func.result),
    });
    library.set(func.name, list);
  }
  return library;
}

export function typeName(type: CheckedType): string {
  switch (type.kind) {
    case 'dyn':
      return 'dyn';
    case 'scalar':
    case 'object':
    case 'record':
      return type.name;
    case 'list':
      return `list(${typeName(type.elem)})`;
    case 'map':
      return `map(${typeName(type.key)}, ${typeName(type.value)})`;
  }
}

function same(a: CheckedType, b: CheckedType): boolean {
  return typeName(a) === typeName(b);
}

/** Whether a value of type `arg` may be passed where `param` is expected. */
function assignable(param: CheckedType, arg: CheckedType): boolean {
  if (param.kind === 'dyn' || arg.kind === 'dyn') return true;
  if (arg.kind === 'record') {
    return param.kind === 'map' && assignable(param.key, STRING) && param.value.kind === 'dyn';
  }
  if (param.kind !== arg.kind) return false;
  if (param.kind === 'list' && arg.kind === 'list') return assignable(param.elem, arg.elem);
  if (param.kind === 'map' && arg.kind === 'map') {
    return assignable(param.key, arg.key) && assignable(param.value, arg.value);
  }
  return same(param, arg);
}

function join(types: CheckedType[]): CheckedType {
  if (!types.length) return DYN;
  return types.every((t) => same(t, types[0])) ? types[0] : DYN;
}

/** The parts of @bufbuild/cel's AST (cel.expr.Expr) the checker reads. */
export interface AstExpr {
  id: bigint;
  exprKind:
    | { case: 'constExpr'; value: { constantKind: { case: string | undefined } } }
    | { case: 'identExpr'; value: { name: string } }
    | { case: 'selectExpr'; value: { operand?: AstExpr; field: string; testOnly: boolean } }
    | { case: 'callExpr'; value: { target?: AstExpr; function: string; args: AstExpr[] } }
    | { case: 'listExpr'; value: { elements: AstExpr[] } }
    | {
        case: 'structExpr';
        value: {
          messageName: string;
          entries: { keyKind: { case: string | undefined; value?: unknown }; value?: AstExpr }[];
        };
      }
    | {
        case: 'comprehensionExpr';
        value: {
          iterVar: string;
          iterVar2: string;
          iterRange?: AstExpr;
          accuVar: string;
          accuInit?: AstExpr;
          loopCondition?: AstExpr;
          loopStep?: AstExpr;
          result?: AstExpr;
        };
      }
    | { case: undefined; value?: undefined };
}

export interface AstSourceInfo {
  positions: Record<string, number>;
  lineOffsets: number[];
}

/** A type error at `offset` (characters into the expression). */
export class CheckError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

const CONSTANT_TYPES: Record<string, CheckedType> = {
  boolValue: BOOL,
  int64Value: INT,
  uint64Value: scalar('uint'),
  doubleValue: scalar('double'),
  stringValue: STRING,
  bytesValue: scalar('bytes'),
  nullValue: scalar('null_type'),
};

class Checker {
  private scopes: Map<string, CheckedType>[] = [];

  constructor(
    private readonly variables: Record<string, CheckedType>,
    private readonly positions: Record<string, number>,
  ) {}

  private fail(node: AstExpr, message: string): never {
    throw new CheckError(message, this.positions[String(node.id)] ?? 0);
  }

  private lookup(name: string): CheckedType | undefined {
    for (let i = this.scopes.length - 1; i >= 0; i--) {
      const found = this.scopes[i].get(name);
      if (found) return found;
    }
    return Object.hasOwn(this.variables, name) ? this.variables[name] : undefined;
  }

  check(node: AstExpr | undefined): CheckedType {
    if (!node) return DYN;
    const kind = node.exprKind;
    switch (kind.case) {
      case 'constExpr':
        return CONSTANT_TYPES[kind.value.constantKind.case ?? ''] ?? DYN;
      case 'identExpr': {
        const found = this.lookup(kind.value.name);
        if (found) return found;
        if (TYPE_NAMES.has(kind.value.name)) return TYPE;
        return this.fail(node, `undeclared reference to '${kind.value.name}'`);
      }
      case 'selectExpr':
        return this.select(node, kind.value);
      case 'callExpr':
        return this.call(node, kind.value);
      case 'listExpr':
        return listOf(join(kind.value.elements.map((e) => this.check(e))));
      case 'structExpr': {
        if (kind.value.messageName) {
          return this.fail(
            node,
            `message construction (${kind.value.messageName}) is not supported`,
          );
        }
        const keys: CheckedType[] = [];
        const values: CheckedType[] = [];
        for (const entry of kind.value.entries) {
          if (entry.keyKind.case !== 'mapKey') return this.fail(node, 'unsupported map entry');
          keys.push(this.check(entry.keyKind.value as AstExpr));
          values.push(this.check(entry.value));
        }
        return { kind: 'map', key: join(keys), value: join(values) };
      }
      case 'comprehensionExpr':
        return this.comprehension(node, kind.value);
      default:
        return this.fail(node, 'unsupported expression');
    }
  }

  private select(
    node: AstExpr,
    { operand, field, testOnly }: { operand?: AstExpr; field: string; testOnly: boolean },
  ): CheckedType {
    const type = this.check(operand);
    let fieldType: CheckedType;
    if (type.kind === 'dyn') fieldType = DYN;
    else if (type.kind === 'record') {
      if (!Object.hasOwn(type.fields, field)) {
        return this.fail(
          node,
          `${type.name} has no field '${field}' (fields: ${Object.keys(type.fields).join(', ')})`,
        );
      }
      fieldType = type.fields[field];
    } else if (type.kind === 'map' && assignable(type.key, STRING)) fieldType = type.value;
    else return this.fail(node, `type '${typeName(type)}' does not support field selection`);
    return testOnly ? BOOL : fieldType;
  }

  private call(
    node: AstExpr,
    { target, function: name, args }: { target?: AstExpr; function: string; args: AstExpr[] },
  ): CheckedType {
    switch (name) {
      case '_&&_':
      case '_||_':
      case '!_':
      case '@not_strictly_false':
        for (const arg of args) this.expectBool(arg, name);
        return BOOL;
      case '_?_:_':
        this.expectBool(args[0], 'the condition of ?:');
        return join([this.check(args[1]), this.check(args[2])]);
      case '_==_':
      case '_!=_': {
        const [a, b] = args.map((arg) => this.check(arg));
        if (
          a.kind === 'scalar' &&
          b.kind === 'scalar' &&
          a.name !== b.name &&
          a.name !== 'null_type' &&
          b.name !== 'null_type' &&
          !(NUMERIC.has(a.name) && NUMERIC.has(b.name))
        ) {
          return this.fail(node, `cannot compare ${a.name} with ${b.name}`);
        }
        return BOOL;
      }
      case '_[_]':
        return this.index(node, this.check(args[0]), this.check(args[1]));
    }
    // `strings.quote(x)` parses as a call on the identifier `strings`.
    let qualified = name;
    let receiver = target;
    if (target?.exprKind.case === 'identExpr' && !this.lookup(target.exprKind.value.name)) {
      const candidate = `${target.exprKind.value.name}.${name}`;
      if (overloads().has(candidate)) {
        qualified = candidate;
        receiver = undefined;
      }
    }
    const candidates = overloads().get(qualified);
    if (!candidates) return this.fail(node, `undeclared reference to '${qualified}'`);
    const targetType = receiver ? this.check(receiver) : undefined;
    const argTypes = args.map((arg) => this.check(arg));
    const matching = candidates.filter(
      (o) =>
        (o.target === undefined) === (targetType === undefined) &&
        (o.target === undefined || assignable(o.target, targetType!)) &&
        o.args.length === argTypes.length &&
        o.args.every((param, i) => assignable(param, argTypes[i])),
    );
    if (!matching.length) {
      const shown = `${targetType ? `${typeName(targetType)}.` : ''}(${argTypes.map(typeName).join(', ')})`;
      return this.fail(node, `found no matching overload for '${qualified}' applied to '${shown}'`);
    }
    if (name === '_+_' && argTypes.every((t) => t.kind === 'list')) return join(argTypes);
    return join(matching.map((o) => o.result));
  }

  private index(node: AstExpr, container: CheckedType, key: CheckedType): CheckedType {
    switch (container.kind) {
      case 'dyn':
        return DYN;
      case 'list':
        if (!assignable(INT, key) && !assignable(scalar('uint'), key)) {
          return this.fail(node, `a list is indexed by an int, not ${typeName(key)}`);
        }
        return container.elem;
      case 'map':
        if (!assignable(container.key, key)) {
          return this.fail(
            node,
            `a ${typeName(container)} is indexed by ${typeName(container.key)}, not ${typeName(key)}`,
          );
        }
        return container.value;
      case 'record':
        if (!assignable(STRING, key))
          return this.fail(node, `${container.name} is indexed by a string`);
        return DYN;
      default:
        return this.fail(node, `type '${typeName(container)}' cannot be indexed`);
    }
  }

  private expectBool(arg: AstExpr, where: string): void {
    const type = this.check(arg);
    if (!assignable(BOOL, type)) {
      this.fail(arg, `${where} needs a bool, not ${typeName(type)}`);
    }
  }

  private comprehension(
    node: AstExpr,
    c: Extract<AstExpr['exprKind'], { case: 'comprehensionExpr' }>['value'],
  ): CheckedType {
    const range = this.check(c.iterRange);
    const vars = new Map<string, CheckedType>();
    const two = c.iterVar2 !== '';
    switch (range.kind) {
      case 'dyn':
        vars.set(c.iterVar, DYN);
        if (two) vars.set(c.iterVar2, DYN);
        break;
      case 'list':
        vars.set(c.iterVar, two ? INT : range.elem);
        if (two) vars.set(c.iterVar2, range.elem);
        break;
      case 'map':
        vars.set(c.iterVar, range.key);
        if (two) vars.set(c.iterVar2, range.value);
        break;
      case 'record':
        vars.set(c.iterVar, STRING);
        if (two) vars.set(c.iterVar2, DYN);
        break;
      default:
        return this.fail(node, `a ${typeName(range)} cannot be iterated`);
    }
    const accu = this.check(c.accuInit);
    this.scopes.push(new Map([[c.accuVar, accu]]));
    try {
      this.scopes.push(vars);
      try {
        this.check(c.loopCondition);
        this.check(c.loopStep);
      } finally {
        this.scopes.pop();
      }
      return this.check(c.result);
    } finally {
      this.scopes.pop();
    }
  }
}

/**
 * The type of the expression, or a CheckError naming what is wrong and where. The
 * expression must evaluate to a bool (or to `dyn`, checked again when it runs).
 */
export function checkPolicyExpression(
  expr: AstExpr,
  sourceInfo: AstSourceInfo | undefined,
  variables: Record<string, CheckedType> = POLICY_VARIABLES,
): CheckedType {
  const checker = new Checker(variables, sourceInfo?.positions ?? {});
  let type: CheckedType;
  try {
    type = checker.check(expr);
  } catch (error) {
    if (error instanceof RangeError) throw new CheckError('the expression nests too deeply', 0);
    throw error;
  }
  if (!assignable(BOOL, type)) {
    throw new CheckError(
      `the expression must evaluate to a bool, not ${typeName(type)}`,
      sourceInfo?.positions[String(expr.id)] ?? 0,
    );
  }
  return type;
}

/** "line L, column C" of a character offset, from the parser's line offsets. */
export function positionOf(offset: number, lineOffsets: readonly number[] = []): string {
  let line = 1;
  let start = 0;
  for (const lineOffset of lineOffsets) {
    if (lineOffset > offset) break;
    line++;
    start = lineOffset;
  }
  return `line ${line}, column ${offset - start + 1}`;
}
