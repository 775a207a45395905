/**
 * The demo's third act: the stale agent is an AI agent that speaks MCP. Agent A is an MCP
 * client (the SDK's) of `planfence mcp`, the stdio bridge an agent host starts. It takes a
 * lease and sends its plan, but the bridge carrying the call is frozen with SIGSTOP, so the
 * call waits in the pipe while A's lease expires; agent B acquires and a reviewer publishes
 * B's plan. The bridge is thawed: A's submit_plan arrives late and is refused as a tool
 * result (STALE_GENERATION) that says what to do next; A follows it. A has no tool to
 * approve anything.
 */
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { ADMIN_TOKEN, type ServiceProcess } from '../test/fault/service.js';

const BIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const LEASE_SECONDS = 1;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const textOf = (result: CallToolResult) =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

/** Plays the act; returns the number of outcomes that differ from docs/design.md §4 and §14. */
export async function mcpAct(
  service: ServiceProcess,
  say: (who: string, text: string) => void,
): Promise<number> {
  console.log(
    '\nThird act: the stale agent speaks MCP. An AI agent reaches planfence through `planfence mcp`; the fence is the same.\n',
  );
  const deviations: string[] = [];
  const a = await service.issueToken('ai-agent-a', 'AGENT');
  const b = await service.issueToken('ai-agent-b', 'AGENT');
  const reviewer = await service.issueToken('reviewer-m', 'REVIEWER');
  const env = 'mcp-story';
  await service.ok(
    ADMIN_TOKEN,
    `mutation { createEnvironment(input: { name: "${env}", mode: MONOTONIC }) { name } }`,
  );
  say('admin', `created ${env} (MONOTONIC, approval required)`);

  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', '--url', service.url, '--token', a],
    stderr: 'pipe',
  });
  const client = new Client({ name: 'demo-ai-agent', version: '1.0.0' });
  await client.connect(transport);
  const call = (name: string, args: Record<string, unknown>) =>
    client.request(
      { method: 'tools/call', params: { name, arguments: args } },
      CallToolResultSchema,
    );
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    say('agent A', `connected over MCP (stdio); its tools: ${tools.join(', ')}`);
    if (tools.some((name) => /approve|reject|reconcile|freeze/.test(name)))
      deviations.push('an AGENT sees a tool that decides');

    const lease = (await call('acquire_lease', { environment: env, ttlSeconds: LEASE_SECONDS }))
      .structuredContent as { generation: number };
    say('agent A', `acquire_lease: generation ${lease.generation} (lease ${LEASE_SECONDS} s)`);

    // A sends its plan, but the bridge that carries the call is paused: the call waits.
    const bridge = transport.pid!;
    process.kill(bridge, 'SIGSTOP');
    const late = call('submit_plan', {
      environment: env,
      generation: lease.generation,
      content: 'scale web to 2 replicas',
      title: 'resize web (A)',
    });
    say('agent A', 'calls submit_plan ... its MCP server process is paused (SIGSTOP) mid-call');
    await sleep(LEASE_SECONDS * 1000 + 300);

    const bLease = await service.ok(
      b,
      `mutation { acquireLease(input: { environment: "${env}", ttlSeconds: 30 }) { generation } }`,
    );
    const generationB = (bLease as { acquireLease: { generation: number } }).acquireLease
      .generation;
    const submitted = await service.ok(
      b,
      `mutation { submitPlan(input: { environment: "${env}", generation: ${generationB}, idempotencyKey: "b-1", content: "scale web to 4 replicas" }) { id } }`,
    );
    const planB = (submitted as { submitPlan: { id: string } }).submitPlan.id;
    await service.ok(reviewer, `mutation { approvePlan(input: { planId: "${planB}" }) { id } }`);
    await service.ok(
      b,
      `mutation { releaseLease(input: { environment: "${env}", generation: ${generationB} }) }`,
    );
    say(
      'agent B',
      `acquired generation ${generationB}; its plan ${planB} is published by a reviewer; B releases its lease`,
    );

    process.kill(bridge, 'SIGCONT');
    const refused = await late;
    const code = (refused.structuredContent as { code?: string } | undefined)?.code ?? 'OK';
    say(
      'agent A',
      `resumes; submit_plan answers isError=${refused.isError === true}: ${textOf(refused)}`,
    );
    if (code !== 'STALE_GENERATION') deviations.push(`A's late submit_plan: ${code}`);

    // The next step the refusal names: read the current plan, take a new lease, plan again.
    const current = (await call('get_plan', { environment: env })).structuredContent as {
      plan: { id: string; content: string } | null;
    };
    const fresh = (
      await call('acquire_lease', { environment: env, ttlSeconds: 30, waitSeconds: 30 })
    ).structuredContent as { generation?: number; code?: string };
    say(
      'agent A',
      `reads the published plan ${current.plan?.id} ("${current.plan?.content}") and takes a new lease: generation ${fresh.generation ?? fresh.code}`,
    );
    if (current.plan?.id !== planB) deviations.push('the published plan is not B');
    if (fresh.generation === undefined) deviations.push('A could not take a new lease');
  } finally {
    await client.close();
  }
  console.log(
    deviations.length
      ? `\n${deviations.length} MCP outcome(s) differ from docs/design.md: ${deviations.join('; ')}`
      : '\nOver MCP too, the stale agent is fenced and told what to do next.',
  );
  return deviations.length;
}
