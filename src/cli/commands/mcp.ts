import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  CallToolResultSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { nextStep } from '../../mcp/next-steps.js';
import { exitCodeOf } from '../exit-codes.js';

const HELP = `planfence mcp — the planfence tools for an AI agent, over MCP on stdin/stdout

Usage: planfence mcp [--url URL] [--token TOKEN]

Serves the tools of the service's POST /mcp endpoint to an agent that starts this command
(Claude Code, Claude Desktop, VS Code, Cursor): the same tools, filtered by the token's role,
with the same refusals. Nothing else is written to stdout. See docs/mcp.md.

  --url URL       the service (default: $PLANFENCE_URL, else http://127.0.0.1:4000)
  --token TOKEN   an AGENT, DEPLOYER, REVIEWER or VIEWER token (default: $PLANFENCE_TOKEN);
                  ADMIN tokens are refused

Exit codes: 0 when stdin closes; 2 bad usage; 3 token refused (or ADMIN); 8 service unreachable.`;

/** Longer than the longest tool wait (wait_for_decision: 120 s). */
const CALL_TIMEOUT_MS = 150_000;

/** A refusal by the HTTP endpoint itself (a token revoked while the agent runs), as R30 tool result. */
function httpRefusal(error: StreamableHTTPError): CallToolResult {
  const code =
    error.code === 401 ? 'UNAUTHENTICATED' : error.code === 403 ? 'FORBIDDEN' : 'INTERNAL';
  return {
    isError: true,
    structuredContent: { code },
    content: [{ type: 'text', text: `${code}: ${error.message}. ${nextStep(code)}` }],
  };
}

/**
 * `planfence mcp`: a bridge from stdio to the service's POST /mcp. The tools, their schemas,
 * who sees which, and every check and refusal live once, in the service; this process only
 * carries messages, so a local agent and a remote one see exactly the same thing.
 */
export async function mcp(
  argv: string[],
  err: (text: string) => void = (t) => process.stderr.write(`${t}\n`),
): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    err(HELP);
    return 0;
  }
  const url = (values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000').replace(
    /\/+$/,
    '',
  );
  const token = values.token ?? process.env.PLANFENCE_TOKEN;
  if (!token) {
    err('planfence mcp: no token: pass --token or set PLANFENCE_TOKEN');
    return 2;
  }
  const remote = new Client({ name: 'planfence-mcp-stdio', version: '0.1.0' });
  try {
    await remote.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
  } catch (error) {
    if (error instanceof StreamableHTTPError && (error.code === 401 || error.code === 403)) {
      const reason = /"message":"([^"]*)"/.exec(error.message)?.[1] ?? error.message;
      err(`planfence mcp: the service refused this token: ${reason}`);
      return exitCodeOf('UNAUTHENTICATED');
    }
    err(`planfence mcp: cannot reach ${url}/mcp: ${(error as Error).message}`);
    return exitCodeOf('INTERNAL');
  }
  const server = new Server(
    { name: 'planfence', version: remote.getServerVersion()?.version ?? '0.1.0' },
    { capabilities: { tools: {} }, instructions: remote.getInstructions() },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request) => remote.listTools(request.params));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    try {
      // request(), not callTool(): the answer is passed on as it came, refusals included
      // (the SDK 1.x callTool checks a refusal against the output schema, typescript-sdk#1943).
      return await remote.request(
        { method: 'tools/call', params: request.params },
        CallToolResultSchema,
        {
          signal: extra.signal,
          timeout: CALL_TIMEOUT_MS,
        },
      );
    } catch (error) {
      if (error instanceof StreamableHTTPError && error.code !== -1) return httpRefusal(error);
      throw error;
    }
  });
  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve;
  });
  await server.connect(new StdioServerTransport());
  await closed;
  await remote.close();
  return 0;
}
