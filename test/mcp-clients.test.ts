/**
 * DESIGN §21 (R48, R49) with the clients agents are built on: the 1.x TypeScript SDK's
 * `Client` (protocol 2025-11-25) and the 2.x client (`@modelcontextprotocol/client`). Both
 * check a tool's `structuredContent` against its declared output schema in `callTool`; a
 * refusal validates (the schema describes both outcomes), so each returns the refusal, with
 * the sentence that tells the agent what to do, instead of throwing.
 */
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as Transport2,
} from '@modelcontextprotocol/client';
import { StdioClientTransport as Stdio2 } from '@modelcontextprotocol/client/stdio';
import { StdioClientTransport as Stdio1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { BIN, type Door } from './support/mcp.js';
import { ok, World } from './support/world.js';

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};

/** What the tests need of either client: callTool as the SDK gives it. */
interface Agent {
  call(
    name: string,
    args: Record<string, unknown>,
  ): Promise<{ isError?: boolean; structuredContent?: unknown; content?: unknown }>;
  close(): Promise<void>;
}

type Sdk = '1.x' | '2.x';
const open: Agent[] = [];

/**
 * Connects with `sdk`'s client over `door` (the service's POST /mcp, or `planfence mcp` as a
 * child process); `capabilities` are what the client declares.
 */
async function connect(
  sdk: Sdk,
  door: Door,
  token: string,
  capabilities: Record<string, unknown> = {},
): Promise<Agent> {
  const url = new URL(`${app.url}/mcp`);
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  const bridge = {
    command: process.execPath,
    args: [BIN, 'mcp', '--url', app.url, '--token', token],
    stderr: 'pipe' as const,
  };
  let agent: Agent;
  if (sdk === '1.x') {
    const client = new Client1({ name: 'agent-1x', version: '1.0.0' }, { capabilities });
    await client.connect(
      door === 'http' ? new Transport1(url, { requestInit }) : new Stdio1(bridge),
    );
    // callTool checks each result against the output schemas listTools gave it.
    await client.listTools();
    agent = {
      call: (name, args) => client.callTool({ name, arguments: args }) as ReturnType<Agent['call']>,
      close: () => client.close(),
    };
  } else {
    const client = new Client2({ name: 'agent-2x', version: '1.0.0' }, { capabilities });
    await client.connect(
      door === 'http' ? new Transport2(url, { requestInit }) : new Stdio2(bridge),
    );
    await client.listTools();
    agent = {
      call: (name, args) => client.callTool({ name, arguments: args }),
      close: () => client.close(),
    };
  }
  open.push(agent);
  return agent;
}

function textOf(result: { content?: unknown }): string {
  return ((result.content ?? []) as { type: string; text?: string }[])
    .map((c) => (c.type === 'text' ? c.text : ''))
    .join('\n');
}

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  for (const [name, role] of [
    ['agent-a', 'AGENT'],
    ['agent-b', 'AGENT'],
    ['reviewer', 'REVIEWER'],
  ] as const)
    tokens[name] = await world.issue(name, role);
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((agent) => agent.close()));
});

afterAll(async () => {
  await app.close();
});

let environments = 0;
async function freshEnvironment(): Promise<string> {
  const name = `clients-${++environments}`;
  await world.createEnvironment(name, 'MONOTONIC');
  return name;
}

// The stdio bridge is a client of the HTTP endpoint, the same whatever database the service
// runs on: it is proven once, in the SQLite project.
const DOORS: Door[] = TEST_DATABASE === 'sqlite' ? ['http', 'stdio'] : ['http'];
const CASES: [Sdk, Door][] = (['1.x', '2.x'] as const).flatMap((sdk) =>
  DOORS.map((door): [Sdk, Door] => [sdk, door]),
);

describe.each<[Sdk, Door]>(CASES)('the %s SDK client over %s', (sdk, door) => {
  // proves: R48
  test('callTool returns LEASE_HELD as a result, with who holds the lease and what to do', async () => {
    const env = await freshEnvironment();
    await world.acquire(tokens['agent-b'], env, 60);
    const agent = await connect(sdk, door, tokens['agent-a']);
    const held = await agent.call('acquire_lease', { environment: env });
    expect(held.isError).toBe(true);
    expect(held.structuredContent).toMatchObject({ code: 'LEASE_HELD', holder: 'agent-b' });
    expect(textOf(held)).toContain(
      'wait (acquire_lease with waitSeconds) or try later; do not work on this environment without a lease',
    );
  });

  // proves: R48
  test('callTool returns STALE_GENERATION as a result, with what to do next', async () => {
    const env = await freshEnvironment();
    const agent = await connect(sdk, door, tokens['agent-a']);
    const mine = await agent.call('acquire_lease', { environment: env, ttlSeconds: 1 });
    expect(mine.structuredContent).toMatchObject({ generation: 1 });
    await world.release(tokens['agent-a'], env, 1);
    const theirs = await world.acquire(tokens['agent-b'], env);
    ok(await world.submit(tokens['agent-b'], env, theirs, 'theirs'));
    const late = await agent.call('submit_plan', {
      environment: env,
      generation: 1,
      content: 'mine',
    });
    expect(late.isError).toBe(true);
    expect(late.structuredContent).toEqual({ code: 'STALE_GENERATION', generation: 1, fence: 2 });
    expect(textOf(late)).toContain(
      'read the current plan with get_plan, take a new lease and plan again',
    );
    // And an output still validates against the same schema.
    const plan = await agent.call('get_plan', { planId: `${env}@2.1` });
    expect(plan.isError).toBeFalsy();
    expect(plan.structuredContent).toMatchObject({
      plan: { id: `${env}@2.1`, status: 'PROPOSED' },
    });
  });

  // proves: R49
  test('a client that declares URL-mode elicitation gets the reviewUrl; whatever it answers, nothing is approved', async () => {
    const env = await freshEnvironment();
    const agent = await connect(sdk, door, tokens['agent-a'], {
      elicitation: { form: {}, url: {} },
    });
    const lease = (await agent.call('acquire_lease', { environment: env })).structuredContent as {
      generation: number;
    };
    const submitted = await agent.call('submit_plan', {
      environment: env,
      generation: lease.generation,
      content: 'scale web to 3',
    });
    const plan = (
      submitted.structuredContent as { plan: { id: string; status: string; reviewUrl: string } }
    ).plan;
    expect(plan.status).toBe('PROPOSED');
    expect(plan.reviewUrl).toBe(`${app.url}/?plan=${encodeURIComponent(plan.id)}`);
    expect(textOf(submitted)).toContain(`approves or rejects it at ${plan.reviewUrl}`);
    // An agent that claims the review happened, in any argument, is refused before any tool
    // runs (no tool has such an argument), and the plan is still awaiting a person.
    const claimed = await agent
      .call('submit_plan', {
        environment: env,
        generation: lease.generation,
        content: 'scale web to 3',
        elicitation: { action: 'accept', content: { approved: true } },
      })
      .then(
        (result) => textOf(result),
        (error: Error) => error.message,
      );
    expect(claimed).toContain('unknown argument "elicitation"');
    // An elicitation answer nobody asked for (accept, with content saying approved), sent as
    // the JSON-RPC response a client gives to a server's request, is taken and dropped.
    const answer = await fetch(`${app.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tokens['agent-a']}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        result: { action: 'accept', content: { approved: true, planId: plan.id } },
      }),
    });
    expect(answer.status).toBe(202);
    const waited = await agent.call('wait_for_decision', { planId: plan.id, timeoutSeconds: 1 });
    expect(waited.structuredContent).toEqual({
      plan: { id: plan.id, status: 'PROPOSED' },
      decided: false,
    });
  });
});
