import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

// The SDK's stdio transport imports node:process, and reading that module's exports opens
// this process's stdin. Nothing here reads it: unreferenced, it does not hold a jest worker
// open once its files are done. A stdin that is a file or /dev/null (jest in band, input
// redirected) is a ReadStream, which holds nothing open and has no unref.
(process.stdin as { unref?: () => void }).unref?.();

/** The built `planfence` binary (`npm test` builds it first). */
export const BIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export type Door = 'http' | 'stdio';

/** An agent that speaks MCP to the service with the SDK's own client. */
export interface McpAgent {
  client: Client;
  tools(): Promise<string[]>;
  /** Calls a tool; the SDK checks `structuredContent` (an output or a refusal) against the tool's output schema. */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  /** The structuredContent of a call that must succeed. */
  ok<T = any>(name: string, args?: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/** Connects over `door`: the service's POST /mcp, or `planfence mcp` started as a child process. */
export async function connectMcp(url: string, token: string, door: Door): Promise<McpAgent> {
  const client = new Client({ name: 'planfence-test-agent', version: '1.0.0' });
  if (door === 'http') {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
  } else {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'mcp', '--url', url, '--token', token],
        stderr: 'pipe',
      }),
    );
  }
  // listTools also gives the client each tool's output schema, which callTool checks.
  const listing = (await client.listTools()).tools;
  const tools = () => Promise.resolve(listing.map((t) => t.name).sort());
  /**
   * tools/call through the SDK's own callTool, which checks `structuredContent` against the
   * tool's output schema: an output and a refusal alike (R48).
   */
  const call = (name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }, CallToolResultSchema, {
      timeout: 150_000,
    }) as Promise<CallToolResult>;
  return {
    client,
    tools,
    call,
    async ok(name, args) {
      const result = await call(name, args);
      if (result.isError) throw new Error(`${name} refused: ${JSON.stringify(result)}`);
      return result.structuredContent as any;
    },
    close: () => client.close(),
  };
}

/** The refusal code of a tool result ('OK' when it is no refusal). */
export function refusalOf(
  result: CallToolResult,
): { code: string; text: string } & Record<string, unknown> {
  if (!result.isError) return { code: 'OK', text: '' };
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  return { ...(result.structuredContent as { code: string }), text };
}
