import { AsyncLocalStorage } from 'node:async_hooks';

/** The door a request came through (AuditEvent.via). */
export type Via = 'graphql' | 'mcp' | 'slack';

/**
 * Set inside an MCP tool call. Node 20's AsyncLocalStorage runs a hook on every promise the
 * process makes while it is enabled (about a fifth of an authenticated GraphQL request's
 * CPU), so only tool calls enter it, and it is disabled again whenever none is in flight:
 * GraphQL requests, the traffic's bulk, are the default door and pay nothing for it.
 */
const mcpDoor = new AsyncLocalStorage<Via>();
let toolCallsInFlight = 0;

/** Runs a tool call's `work` as a request through the `mcp` door; decisions it starts record that door. */
export function throughMcp<T>(work: () => Promise<T>): Promise<T> {
  return through('mcp', work);
}

/** Runs a Slack click's `work` (src/slack/) as a request through the `slack` door. */
export function throughSlack<T>(work: () => Promise<T>): Promise<T> {
  return through('slack', work);
}

async function through<T>(door: Via, work: () => Promise<T>): Promise<T> {
  toolCallsInFlight++;
  try {
    return await mcpDoor.run(door, work);
  } finally {
    // No tool call's context is left to read it: the hook can go until the next one.
    if (--toolCallsInFlight === 0) mcpDoor.disable();
  }
}

/**
 * The door of the request this code runs for: `mcp` inside a tool call, else `graphql`
 * (every other request that decides comes through GraphQL; the service's own decisions say
 * `via: null` themselves). Read where a decision starts, in the request's own async context:
 * the SQLite group commit runs the decision's statements in whichever request's context
 * drains the group, so reading it there would be wrong.
 */
export function currentVia(): Via {
  return mcpDoor.getStore() ?? 'graphql';
}
