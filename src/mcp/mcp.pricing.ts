import type { LimitsConfig } from '../config/config.js';

/** Why a request to POST /mcp is refused before any of its messages is answered. */
export interface McpLimit {
  /** Which limit (extensions.limit, as GraphQL's request limits say it). */
  limit: 'batch' | 'waits' | 'cost';
  max: number;
  message: string;
}

/** What a request to POST /mcp costs, priced before the transport reads it. */
export interface McpPrice {
  /** Messages in the request (1 for a single message). */
  messages: number;
  /** Whether the body is a JSON-RPC batch (an array). */
  batch: boolean;
  /** The estimated cost, in GraphQL's units (1 per message, plan content its size bound in KiB). */
  cost: number;
  /** Set when the request is refused as a whole. */
  refused: McpLimit | null;
}

/** What the prices read of the configuration. */
export interface McpWeights {
  /** A plan's content (or summary) as GraphQL weighs it: its size bound in KiB. */
  contentWeight: number;
  limits: Pick<LimitsConfig, 'maxRootFields' | 'maxCost'>;
}

/** `environments` is priced as GraphQL prices a list without a page size. */
const UNPAGED_LIST_SIZE = 100;

/** The tool calls a batch must not hold: they answer only when a decision comes or time passes. */
function waits(name: string, args: Record<string, unknown>): boolean {
  return (
    name === 'wait_for_decision' ||
    (name === 'acquire_lease' && typeof args.waitSeconds === 'number' && args.waitSeconds > 0)
  );
}

/**
 * One message's cost, as GraphQL's estimate would price the operation it stands for: 1, plus
 * for `get_plan` the plan it reads (content and summary, each its size bound in KiB: the
 * answer carries at most 64 KiB of content, but the plan is read whole), for
 * `wait_for_decision` the plan it reads again and again, for `submit_plan` the content it
 * hashes and stores, and for `list_environments` the environments it lists.
 */
function messageCost(message: unknown, weights: McpWeights): { cost: number; waits: boolean } {
  const { method, params } = (message ?? {}) as { method?: unknown; params?: unknown };
  if (method !== 'tools/call') return { cost: 1, waits: false };
  const call = (params ?? {}) as { name?: unknown; arguments?: unknown };
  const name = typeof call.name === 'string' ? call.name : '';
  const args = (
    typeof call.arguments === 'object' && call.arguments !== null ? call.arguments : {}
  ) as Record<string, unknown>;
  const plan = Math.max(1, weights.contentWeight);
  const cost =
    name === 'get_plan'
      ? 1 + 2 * plan
      : name === 'wait_for_decision' || name === 'submit_plan'
        ? 1 + plan
        : name === 'list_environments'
          ? 1 + UNPAGED_LIST_SIZE
          : 1;
  return { cost, waits: waits(name, args) };
}

/**
 * Prices the body of a request to POST /mcp before any of it runs, as GraphQL prices a query
 * (docs/limits.md): a JSON-RPC batch is one request whose messages are like a query's root
 * fields. A batch of more than `maxRootFields` messages is refused; so is one that holds a
 * call that waits (its answer would hold every other answer of the batch for minutes); so is
 * a request whose estimated cost is over `maxCost`. The cost (in KiB, for what a request
 * reads and answers) also decides whether the request is expensive (McpController).
 */
export function priceMcpBody(body: unknown, weights: McpWeights): McpPrice {
  const batch = Array.isArray(body);
  const messages: unknown[] = batch ? body : [body];
  const { maxRootFields, maxCost } = weights.limits;
  const priced: McpPrice = { messages: messages.length, batch, cost: 0, refused: null };
  if (batch && messages.length > maxRootFields) {
    priced.refused = {
      limit: 'batch',
      max: maxRootFields,
      message: `a batch of ${messages.length} messages; the limit is ${maxRootFields} (PLANFENCE_MAX_ROOT_FIELDS): send fewer at once`,
    };
    return priced;
  }
  for (const message of messages) {
    const { cost, waits } = messageCost(message, weights);
    if (batch && waits) {
      priced.refused = {
        limit: 'waits',
        max: 0,
        message:
          'a call that waits (wait_for_decision, acquire_lease with waitSeconds) is sent on its own, not in a batch',
      };
      return priced;
    }
    priced.cost += cost;
  }
  if (priced.cost > maxCost) {
    priced.refused = {
      limit: 'cost',
      max: maxCost,
      message: `the request's estimated cost is ${priced.cost}; the limit is ${maxCost} (PLANFENCE_MAX_QUERY_COST: each message 1, a plan read its size bound in KiB)`,
    };
  }
  return priced;
}
