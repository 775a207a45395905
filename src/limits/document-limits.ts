import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  getNamedType,
  getNullableType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  Location,
  OperationTypeNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import type { LimitsConfig } from '../config/config.js';
import { InputError } from '../common/errors.js';
import { RequestLimitError } from '../common/limit.errors.js';

/** Brackets may nest this much deeper than selections (arguments, input objects, lists). */
export function maxNesting(limits: LimitsConfig): number {
  return limits.maxDepth * 2 + 16;
}

/**
 * Before parsing: the document's size in bytes, and how deep its brackets nest (a
 * recursive-descent parser must never see `[[[[...` thousands deep). One pass over the
 * text; string literals and comments are skipped.
 */
export function checkDocumentText(source: string, limits: LimitsConfig): void {
  // Each UTF-16 unit is at most 3 UTF-8 bytes: only count bytes when it could matter.
  if (source.length * 3 > limits.maxQueryBytes) {
    const bytes = source.length > limits.maxQueryBytes ? source.length : Buffer.byteLength(source);
    if (bytes > limits.maxQueryBytes) {
      throw new RequestLimitError(
        'queryBytes',
        limits.maxQueryBytes,
        `the query document has more than ${limits.maxQueryBytes} bytes (PLANFENCE_MAX_QUERY_BYTES); send large values as variables`,
      );
    }
  }
  const limit = maxNesting(limits);
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (c === 0x7b || c === 0x5b || c === 0x28) {
      // { [ (
      if (++depth > limit) {
        throw new RequestLimitError(
          'nesting',
          limit,
          `the query nests brackets more than ${limit} deep (2 × PLANFENCE_MAX_QUERY_DEPTH + 16)`,
        );
      }
    } else if (c === 0x7d || c === 0x5d || c === 0x29) {
      depth--;
    } else if (c === 0x23) {
      // # comment to the end of the line
      while (i < source.length && source.charCodeAt(i) !== 0x0a && source.charCodeAt(i) !== 0x0d)
        i++;
    } else if (c === 0x22) {
      // "string" or """block string"""
      if (source.startsWith('"""', i)) {
        const end = source.indexOf('"""', i + 3);
        // Escaped \""" inside a block string: keep looking past it.
        let close = end;
        while (close > 0 && source.charCodeAt(close - 1) === 0x5c)
          close = source.indexOf('"""', close + 3);
        i = close < 0 ? source.length : close + 2;
      } else {
        for (i++; i < source.length; i++) {
          const s = source.charCodeAt(i);
          if (s === 0x5c) i++;
          else if (s === 0x22 || s === 0x0a) break;
        }
      }
    }
  }
}

interface Shape {
  /** Fields at this level, through fragments (for the root: root fields, aliases included). */
  top: number;
  /** Fields, fragments expanded. */
  fields: number;
  /** Deepest selection nesting below (a leaf field is 1). */
  depth: number;
}

/**
 * After parsing, before validation (whose cost grows with the document): root fields,
 * fields with fragments expanded, and depth of every operation. Fragments are measured
 * once each, so a document of fragments that spread each other many times is measured in
 * linear time and refused for what it would expand to.
 */
export function checkDocumentShape(document: DocumentNode, limits: LimitsConfig): void {
  if (document?.kind !== Kind.DOCUMENT || !(document.loc instanceof Location)) {
    // Mercurius falls back to JSON.parse for text that is not GraphQL: accept only parsed text.
    throw new InputError('BAD_USER_INPUT', 'the query must be a GraphQL document (a string)');
  }
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition);
  const measured = new Map<string, Shape>();
  const measuring = new Set<string>();

  const shapeOf = (set: SelectionSetNode): Shape => {
    let top = 0;
    let fields = 0;
    let depth = 0;
    for (const selection of set.selections) {
      let inner: Shape;
      if (selection.kind === Kind.FIELD) {
        const below = selection.selectionSet ? shapeOf(selection.selectionSet) : null;
        inner = { top: 1, fields: 1 + (below?.fields ?? 0), depth: 1 + (below?.depth ?? 0) };
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        inner = shapeOf(selection.selectionSet);
      } else {
        inner = fragmentShape(selection.name.value);
      }
      top += inner.top;
      fields += inner.fields;
      depth = Math.max(depth, inner.depth);
    }
    return { top, fields, depth };
  };
  const fragmentShape = (name: string): Shape => {
    const known = measured.get(name);
    if (known) return known;
    const fragment = fragments.get(name);
    // Unknown or cyclic fragments: validation refuses them with its own message.
    if (!fragment || measuring.has(name)) return { top: 0, fields: 0, depth: 0 };
    measuring.add(name);
    const shape = shapeOf(fragment.selectionSet);
    measuring.delete(name);
    measured.set(name, shape);
    return shape;
  };

  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const root = shapeOf(definition.selectionSet);
    if (root.top > limits.maxRootFields) {
      throw new RequestLimitError(
        'rootFields',
        limits.maxRootFields,
        `the operation has ${root.top} root fields, aliases included; the limit is ${limits.maxRootFields} (PLANFENCE_MAX_ROOT_FIELDS)`,
      );
    }
    if (root.fields > limits.maxFields) {
      throw new RequestLimitError(
        'fields',
        limits.maxFields,
        `the operation selects ${root.fields} fields, fragments expanded; the limit is ${limits.maxFields} (PLANFENCE_MAX_QUERY_FIELDS)`,
      );
    }
    if (root.depth > limits.maxDepth) {
      throw new RequestLimitError(
        'depth',
        limits.maxDepth,
        `the operation nests selections ${root.depth} deep; the limit is ${limits.maxDepth} (PLANFENCE_MAX_QUERY_DEPTH)`,
      );
    }
  }
}

/** A list field without a `first` argument is assumed to return this many items. */
export const UNPAGED_LIST_SIZE = 100;

export interface CostInput {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName?: string | null;
  variables?: Record<string, unknown> | null;
  /** What one `Plan.content` (and one `Plan.summary`, computed from it) weighs: its size bound in KiB. */
  contentWeight: number;
  /** Rows a list without a page size returns, by `Type.field`, when known (else 100). */
  unpagedSizes?: Record<string, number>;
  /** What one `Plan.artifact` weighs: its base64 size bound in KiB (default: contentWeight). */
  artifactWeight?: number;
}

export interface Cost {
  cost: number;
  /** The operation reads `__schema` or `__type`. */
  introspection: boolean;
  /** `Type.field` of the lists priced at the assumed 100 items, having no page size. */
  unpaged: Set<string>;
}

function pageSize(
  field: FieldNode,
  definition: GraphQLField<unknown, unknown>,
  variables: Record<string, unknown>,
  unpaged: () => number,
): number {
  const argument = definition.args.find((a) => a.name === 'first');
  if (!argument) return unpaged();
  const given = field.arguments?.find((a) => a.name.value === 'first')?.value;
  const value = (node: ValueNode | undefined): unknown => {
    if (!node) return argument.defaultValue;
    if (node.kind === Kind.INT) return Number(node.value);
    if (node.kind === Kind.VARIABLE) return variables[node.name.value] ?? argument.defaultValue;
    return undefined;
  };
  const n = value(given);
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : unpaged();
}

/**
 * The estimated cost of the operation that will run, before it runs: every field costs 1,
 * `Plan.content` and `Plan.summary` cost the content's size bound in KiB, `Plan.artifact` its
 * own, and a list multiplies what it selects by its page size (`first`, from the literal,
 * the variables or the default; for a list without one, its real number of rows when
 * `unpagedSizes` knows it, else 100). Introspection is bounded by the schema and costs its
 * fields only.
 */
export function estimateCost(input: CostInput): Cost {
  const { schema, document, contentWeight } = input;
  const weights: Record<string, number> = {
    content: contentWeight,
    summary: contentWeight,
    artifact: input.artifactWeight ?? contentWeight,
  };
  const variables = input.variables ?? {};
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition);
  const memo = new Map<string, number>();
  const visiting = new Set<string>();
  const unpaged = new Set<string>();
  let introspection = false;

  const costOf = (set: SelectionSetNode, parent: GraphQLNamedType | null | undefined): number => {
    let cost = 0;
    for (const selection of set.selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        const type = selection.typeCondition
          ? schema.getType(selection.typeCondition.name.value)
          : parent;
        cost += costOf(selection.selectionSet, type);
        continue;
      }
      if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (!fragment || visiting.has(name)) continue;
        let known = memo.get(name);
        if (known === undefined) {
          visiting.add(name);
          known = costOf(fragment.selectionSet, schema.getType(fragment.typeCondition.name.value));
          visiting.delete(name);
          memo.set(name, known);
        }
        cost += known;
        continue;
      }
      const name = selection.name.value;
      if (name === '__schema' || name === '__type') {
        introspection = true;
        cost += 1;
        continue;
      }
      const definition =
        parent && (isObjectType(parent) || isInterfaceType(parent))
          ? parent.getFields()[name]
          : undefined;
      if (!definition) {
        cost += 1;
        continue;
      }
      let own = parent!.name === 'Plan' && name in weights ? Math.max(1, weights[name]) : 1;
      if (selection.selectionSet)
        own += costOf(selection.selectionSet, getNamedType(definition.type));
      const list = isListType(getNullableType(definition.type));
      const key = `${parent!.name}.${name}`;
      const size = () => {
        const known = input.unpagedSizes?.[key];
        if (known !== undefined) return Math.max(1, known);
        unpaged.add(key);
        return UNPAGED_LIST_SIZE;
      };
      cost += list ? own * pageSize(selection, definition, variables, size) : own;
    }
    return cost;
  };

  let total = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    if (input.operationName && definition.name?.value !== input.operationName) continue;
    const root =
      definition.operation === OperationTypeNode.QUERY
        ? schema.getQueryType()
        : definition.operation === OperationTypeNode.MUTATION
          ? schema.getMutationType()
          : schema.getSubscriptionType();
    total = Math.max(total, costOf(definition.selectionSet, root));
  }
  return { cost: total, introspection, unpaged };
}

export function checkCost(cost: number, limits: LimitsConfig): void {
  if (cost > limits.maxCost) {
    throw new RequestLimitError(
      'cost',
      limits.maxCost,
      `the operation's estimated cost is ${cost}; the limit is ${limits.maxCost} (PLANFENCE_MAX_QUERY_COST: each field 1, plan content its size bound in KiB, lists times their page size)`,
    );
  }
}
