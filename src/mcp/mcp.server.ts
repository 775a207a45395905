import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Principal } from '../model/principal.entity.js';
import type { McpCall, McpTools } from './mcp.tools.js';

export const SERVER_INFO = { name: 'planfence', version: '0.1.0' };

/** What the server tells the model about itself (MCP `instructions`). */
export const INSTRUCTIONS = `planfence guards the publication of deployment plans with fencing tokens.
Work on an environment only under a lease: acquire_lease returns a generation; pass it to submit_plan.
A human reviews and publishes plans elsewhere (submit_plan returns the plan's reviewUrl, the page
where they do); no tool approves, and none should be looked for.
A refusal is a tool result with a code and what to do next. STALE_GENERATION or LEASE_NOT_HELD mean
another agent has moved on: your plan is obsolete; read the current plan (get_plan), take a new lease
and plan again. Never retry a fenced submit with the old generation.`;

/** What one request to the MCP endpoint brings to its server besides the principal. */
/** One MCP server for one principal: the tools its role may call (R29), nothing else. */
export function mcpServerFor(principal: Principal, tools: McpTools, call: McpCall): McpServer {
  const server = new McpServer(SERVER_INFO, {
    capabilities: { tools: {} },
    instructions: INSTRUCTIONS,
  });
  tools.register(server, principal, call);
  return server;
}
