// A scripted AI agent over MCP, with the SDK's own client: it takes a lease, is paused past
// it while another agent takes over and writes, and gets the fenced refusal, which says what
// to do next. Run against a service with an environment "prod" (MONOTONIC or STRICT):
//
//   PLANFENCE_URL=http://127.0.0.1:4000 PLANFENCE_TOKEN=<agent A> PLANFENCE_TOKEN_B=<agent B> \
//     node dist/examples/mcp-agent.js
//
// A real agent host (Claude Code, ...) makes these same calls on the model's behalf.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
const environment = process.env.PLANFENCE_ENVIRONMENT ?? 'prod';

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: 'example-agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The fields of the tools' structuredContent this script reads (a refusal has a code). */
interface ToolOutput {
  generation?: number;
  expiresAt?: string;
  plan?: { id: string };
  code?: string;
}

// client.request() rather than client.callTool(): the 1.x SDK's callTool checks a refusal's
// structuredContent against the tool's output schema and throws (typescript-sdk#1943).
async function call(client: Client, name: string, args: Record<string, unknown>) {
  const result: CallToolResult = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CallToolResultSchema,
  );
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  return { result, data: result.structuredContent as ToolOutput, text };
}

/** A refusal this script cannot go on after (another agent holds the lease). */
class Refused extends Error {}

/** A lease this script cannot go on without: a refusal ends the run. */
async function leaseOf(client: Client, who: string, ttlSeconds: number) {
  const lease = await call(client, 'acquire_lease', { environment, ttlSeconds });
  if (lease.result.isError || lease.data?.generation === undefined)
    throw new Refused(`${who} got no lease on ${environment}: ${lease.text}`);
  return { generation: lease.data.generation, expiresAt: lease.data.expiresAt };
}

const a = await connect(process.env.PLANFENCE_TOKEN ?? '');
const b = await connect(process.env.PLANFENCE_TOKEN_B ?? '');
try {
  const tools = (await a.listTools()).tools.map((tool) => tool.name);
  console.log(`A's tools: ${tools.join(', ')}`);

  const lease = await leaseOf(a, 'A', 2);
  console.log(`A holds generation ${lease.generation} until ${lease.expiresAt}`);

  console.log('A is paused (a slow model call) past its lease ...');
  await new Promise((resolve) => setTimeout(resolve, 2500));

  // Meanwhile B takes the lease and submits: the fence rises to B's generation.
  const leaseB = await leaseOf(b, 'B', 30);
  const planB = await call(b, 'submit_plan', {
    environment,
    generation: leaseB.generation,
    content: 'scale web to 4 replicas',
  });
  console.log(`B took generation ${leaseB.generation} and submitted ${planB.data.plan?.id}`);

  // A resumes with its old generation.
  const late = await call(a, 'submit_plan', {
    environment,
    generation: lease.generation,
    content: 'scale web to 2 replicas',
  });
  console.log(`A's submit_plan: isError=${late.result.isError === true}`);
  console.log(`  structuredContent: ${JSON.stringify(late.data)}`);
  console.log(`  ${late.text}`);
  await call(b, 'release_lease', { environment, generation: leaseB.generation });
} catch (error) {
  if (!(error instanceof Refused)) throw error;
  console.error(error.message);
  process.exitCode = 1;
} finally {
  await a.close();
  await b.close();
}
