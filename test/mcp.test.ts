/**
 * DESIGN §14 (R28–R30) and §21 (R48, R49): AI agents over MCP, with the SDK's own client,
 * over both doors — the service's POST /mcp (Streamable HTTP, stateless) and `planfence mcp`
 * (stdio). What MCP's clients do outside the service (a reviewer's browser at the reviewUrl,
 * the example agent, `planfence mcp`'s exits) is test/mcp-clients-outside.test.ts's.
 */
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { LeaseQueueSweeper } from '../src/leases/lease-queue.sweeper.js';
import { scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { connectMcp, type Door, type McpAgent, refusalOf } from './support/mcp.js';
import { until } from './support/until.js';
import { ok, World } from './support/world.js';
import { withTerraform } from './support/commands.js';

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};
const agents: McpAgent[] = [];

const READS = ['get_plan', 'list_environments', 'wait_for_decision'];
const AGENT_TOOLS = ['acquire_lease', 'release_lease', 'renew_lease', 'submit_plan'];
const DEPLOYER_TOOLS = ['finish_deployment', 'heartbeat_deployment', 'start_deployment'];

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  for (const [name, role] of [
    ['agent-a', 'AGENT'],
    ['agent-b', 'AGENT'],
    ['reviewer', 'REVIEWER'],
    ['deployer', 'DEPLOYER'],
    ['viewer', 'VIEWER'],
  ] as const)
    tokens[name] = await world.issue(name, role);
  tokens.scoped = ok(
    await world.gql<{ issueToken: { token: string } }>(
      world.admin,
      'mutation { issueToken(name: "staging-agent", role: AGENT, environments: ["staging-*"]) { token } }',
    ),
  ).issueToken.token;
});

afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

afterAll(async () => {
  await app.close();
});

async function connect(token: string, door: Door): Promise<McpAgent> {
  const agent = await connectMcp(app.url, token, door);
  agents.push(agent);
  return agent;
}

let environments = 0;
async function freshEnvironment(
  mode: 'MONOTONIC' | 'STRICT' = 'MONOTONIC',
  prefix = 'mcp',
): Promise<string> {
  const name = `${prefix}-${++environments}`;
  await world.createEnvironment(name, mode);
  return name;
}

// The stdio bridge is a client of the HTTP endpoint, the same whatever database the service
// runs on: it is proven once, in the SQLite project.
const DOORS: Door[] = TEST_DATABASE === 'sqlite' ? ['http', 'stdio'] : ['http'];

/** Every text of a tool result, in order. */
const textOf = (result: CallToolResult) =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe.each<Door>(DOORS)('over %s', (door) => {
  test('initialize: the server names itself and tells the model how to behave', async () => {
    const agent = await connect(tokens['agent-a'], door);
    expect(agent.client.getServerVersion()?.name).toBe('planfence');
    expect(agent.client.getServerCapabilities()?.tools).toBeDefined();
    expect(agent.client.getInstructions()).toContain('STALE_GENERATION');
  });

  // proves: R29
  test('tools/list shows each role only what it may call, and nobody an approving tool', async () => {
    const seen: Record<string, string[]> = {};
    for (const name of ['agent-a', 'deployer', 'viewer', 'reviewer', 'scoped'])
      seen[name] = await (await connect(tokens[name], door)).tools();
    expect(seen['agent-a']).toEqual([...AGENT_TOOLS, ...READS].sort());
    expect(seen.scoped).toEqual([...AGENT_TOOLS, ...READS].sort());
    expect(seen.deployer).toEqual([...DEPLOYER_TOOLS, ...READS].sort());
    expect(seen.viewer).toEqual(READS);
    // A REVIEWER's token sees no tool that writes: reviewing happens elsewhere, by a human.
    expect(seen.reviewer).toEqual(READS);
    const everything = Object.values(seen).flat();
    for (const forbidden of [
      /approve/,
      /reject/,
      /reconcile/,
      /freeze/,
      /polic/,
      /token/,
      /webhook/,
    ])
      expect(everything.filter((name) => forbidden.test(name))).toEqual([]);
  });

  test('annotations: reads are read-only, submit_plan idempotent and not destructive, deployments destructive', async () => {
    const agent = await connect(tokens['agent-a'], door);
    const deployer = await connect(tokens.deployer, door);
    const tools = [
      ...(await agent.client.listTools()).tools,
      ...(await deployer.client.listTools()).tools,
    ];
    const of = (name: string) => tools.find((tool) => tool.name === name)!;
    for (const name of READS)
      expect(of(name).annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
    expect(of('submit_plan').annotations).toMatchObject({
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
    for (const name of DEPLOYER_TOOLS)
      expect(of(name).annotations).toMatchObject({ destructiveHint: true, openWorldHint: false });
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      // Only the declared arguments (an unknown one is refused).
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.outputSchema?.type).toBe('object');
    }
  });

  // An argument no tool declares, such as `approve`, means nothing and is refused.
  // proves: R29
  test('an unknown argument is refused by the protocol (-32602) naming it, for every tool, before the tool runs', async () => {
    const env = await freshEnvironment();
    const agent = await connect(tokens['agent-a'], door);
    const deployer = await connect(tokens.deployer, door);
    const calls: [McpAgent, string, Record<string, unknown>][] = [
      [agent, 'list_environments', {}],
      [agent, 'get_plan', { environment: env }],
      [agent, 'wait_for_decision', { planId: `${env}@1.1`, timeoutSeconds: 1 }],
      [agent, 'acquire_lease', { environment: env }],
      [agent, 'renew_lease', { environment: env, generation: 1 }],
      [agent, 'release_lease', { environment: env, generation: 1 }],
      [agent, 'submit_plan', { environment: env, generation: 1, content: 'x' }],
      [deployer, 'start_deployment', { planId: `${env}@1.1` }],
      [deployer, 'heartbeat_deployment', { deploymentId: `${env}#1` }],
      [deployer, 'finish_deployment', { deploymentId: `${env}#1`, outcome: 'SUCCEEDED' }],
    ];
    expect(calls.map(([, name]) => name).sort()).toEqual(
      [...AGENT_TOOLS, ...DEPLOYER_TOOLS, ...READS].sort(),
    );
    for (const [who, name, args] of calls) {
      const result = await who.call(name, { ...args, approve: true });
      expect({ name, isError: result.isError, structured: result.structuredContent }).toEqual({
        name,
        isError: true,
        structured: undefined,
      });
      expect(textOf(result)).toMatch(/^MCP error -32602: .*unknown argument "approve"$/);
    }
    const two = await agent.call('submit_plan', {
      environment: env,
      generation: 1,
      content: 'x',
      approved: true,
      reviewer: 'agent-a',
    });
    expect(textOf(two)).toContain('unknown arguments "approved", "reviewer"');
    // No tool ran: no lease was taken, no plan stored, nothing audited but the creation.
    expect((await world.auditEvents(env)).map((e) => e.action)).toEqual(['CREATE_ENVIRONMENT']);
  });

  test('every tool on its happy path; the output matches its schema', async () => {
    const env = await freshEnvironment();
    const agent = await connect(tokens['agent-a'], door);
    const deployer = await connect(tokens.deployer, door);

    const listed = await agent.ok('list_environments');
    expect(listed.environments).toContainEqual({
      name: env,
      mode: 'MONOTONIC',
      frozen: false,
      currentPlanId: null,
      lease: null,
      queueLength: 0,
    });

    const lease = await agent.ok('acquire_lease', {
      environment: env,
      ttlSeconds: 60,
      instance: 'w1',
    });
    expect(lease).toMatchObject({ environment: env, generation: 1, holder: 'agent-a/w1' });
    expect(Date.parse(lease.expiresAt)).toBe((await app.clock.now()) + 60_000);
    const renewed = await agent.ok('renew_lease', {
      environment: env,
      generation: 1,
      ttlSeconds: 120,
    });
    expect(renewed).toMatchObject({
      generation: 1,
      expiresAt: new Date((await app.clock.now()) + 120_000).toISOString(),
    });

    const submitResult = await agent.call('submit_plan', {
      environment: env,
      generation: 1,
      content: 'scale web to 4',
      title: 'resize web',
    });
    const submitted = submitResult.structuredContent as { plan: Record<string, unknown> };
    // R49: the plan's console page, under the address this client reaches the service at.
    const reviewUrl = `${app.url}/?plan=${encodeURIComponent(`${env}@1.1`)}`;
    expect(submitted.plan).toEqual({
      id: `${env}@1.1`,
      status: 'PROPOSED',
      contentHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      summary: null,
      pendingApprovalRules: [{ group: null, count: 1 }],
      pendingChecks: [],
      policyResults: [],
      reviewUrl,
    });
    // The text says what to do next: have a person review it there, and wait for the decision.
    expect(textOf(submitResult)).toContain(
      `Plan ${env}@1.1 awaits review: a person approves or rejects it at ${reviewUrl}`,
    );
    expect(textOf(submitResult)).toContain('wait_for_decision');

    const read = await agent.ok('get_plan', { planId: `${env}@1.1` });
    expect(read.plan).toMatchObject({
      id: `${env}@1.1`,
      environment: env,
      generation: 1,
      sequence: 1,
      status: 'PROPOSED',
      title: 'resize web',
      content: 'scale web to 4',
      contentTruncated: false,
      contentHash: submitted.plan.contentHash,
    });
    expect(await agent.ok('get_plan', { environment: env })).toEqual({ plan: null });

    // wait_for_decision returns when a reviewer publishes (elsewhere: over GraphQL).
    const waiting = agent.ok('wait_for_decision', { planId: `${env}@1.1`, timeoutSeconds: 120 });
    ok(await world.approve(tokens.reviewer, `${env}@1.1`));
    expect(await waiting).toEqual({
      plan: { id: `${env}@1.1`, status: 'PUBLISHED' },
      decided: true,
    });
    expect((await agent.ok('get_plan', { environment: env })).plan).toMatchObject({
      id: `${env}@1.1`,
      status: 'PUBLISHED',
    });

    expect(await agent.ok('release_lease', { environment: env, generation: 1 })).toEqual({
      released: true,
    });

    const started = await deployer.ok('start_deployment', {
      planId: `${env}@1.1`,
      heartbeatSeconds: 30,
    });
    expect(started.deployment).toEqual({
      id: `${env}#1`,
      sequence: 1,
      status: 'IN_PROGRESS',
      heartbeatExpiresAt: new Date((await app.clock.now()) + 30_000).toISOString(),
    });
    expect(
      (
        await deployer.ok('heartbeat_deployment', {
          deploymentId: `${env}#1`,
          heartbeatSeconds: 60,
        })
      ).deployment,
    ).toMatchObject({ id: `${env}#1`, status: 'IN_PROGRESS' });
    expect(
      (
        await deployer.ok('finish_deployment', {
          deploymentId: `${env}#1`,
          outcome: 'SUCCEEDED',
          detail: 'applied',
        })
      ).deployment,
    ).toMatchObject({ id: `${env}#1`, sequence: 1, status: 'SUCCEEDED' });
  });

  test('wait_for_decision answers decided: false at its time-out while the plan is still PROPOSED', async () => {
    const env = await freshEnvironment();
    const generation = await world.acquire(tokens['agent-a'], env);
    ok(await world.submit(tokens['agent-a'], env, generation, 'wait for me'));
    const viewer = await connect(tokens.viewer, door);
    expect(
      await viewer.ok('wait_for_decision', { planId: `${env}@1.1`, timeoutSeconds: 1 }),
    ).toEqual({
      plan: { id: `${env}@1.1`, status: 'PROPOSED' },
      decided: false,
    });
  });

  // The SDK's callTool checks the refusal against the output schema.
  // proves: R28, R30, R48
  test('the paused agent: A submits after B published and gets STALE_GENERATION with what to do next', async () => {
    const env = await freshEnvironment();
    const a = await connect(tokens['agent-a'], door);
    const b = await connect(tokens['agent-b'], door);
    const leaseA = await a.ok('acquire_lease', { environment: env, ttlSeconds: 2 });
    expect(leaseA.generation).toBe(1);
    // A pauses past its lease; B takes the next generation and publishes.
    world.advance(3);
    const leaseB = await b.ok('acquire_lease', { environment: env, ttlSeconds: 60 });
    expect(leaseB.generation).toBe(2);
    const planB = await b.ok('submit_plan', {
      environment: env,
      generation: 2,
      content: 'scale web to 4',
    });
    ok(await world.approve(tokens.reviewer, planB.plan.id));

    const late = await a.call('submit_plan', {
      environment: env,
      generation: 1,
      content: 'scale web to 2',
    });
    expect(late.isError).toBe(true);
    expect(late.structuredContent).toEqual({ code: 'STALE_GENERATION', generation: 1, fence: 2 });
    expect(refusalOf(late).text).toContain(
      'read the current plan with get_plan, take a new lease and plan again',
    );
    // Nothing of A's was stored; the published plan is still B's.
    expect((await a.ok('get_plan', { environment: env })).plan.id).toBe(`${env}@2.1`);
    const refusals = (await world.auditEvents(env)).filter((e) => e.outcome === 'REJECTED');
    expect(refusals).toMatchObject([
      { action: 'SUBMIT_PLAN', code: 'STALE_GENERATION', actor: 'agent-a' },
    ]);
  });

  // proves: R28
  test('a scoped token neither sees nor touches another environment', async () => {
    const mine = await freshEnvironment('MONOTONIC', 'staging');
    const theirs = await freshEnvironment('MONOTONIC', 'prod');
    const generation = await world.acquire(tokens['agent-b'], theirs);
    ok(await world.submit(tokens['agent-b'], theirs, generation, 'prod plan'));
    const scoped = await connect(tokens.scoped, door);
    const names = (await scoped.ok('list_environments')).environments.map(
      (e: { name: string }) => e.name,
    );
    expect(names).toContain(mine);
    expect(names.every((name: string) => name.startsWith('staging-'))).toBe(true);
    for (const [tool, args] of [
      ['get_plan', { planId: `${theirs}@1.1` }],
      ['get_plan', { environment: theirs }],
      ['wait_for_decision', { planId: `${theirs}@1.1`, timeoutSeconds: 1 }],
      ['acquire_lease', { environment: theirs }],
      ['submit_plan', { environment: theirs, generation: 1, content: 'x' }],
    ] as const) {
      expect(refusalOf(await scoped.call(tool, args))).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect((await scoped.ok('acquire_lease', { environment: mine })).generation).toBe(1);
    // R27: refusals on an environment are audited there, and say they came through MCP.
    const events = ok(
      await world.gql<{ auditEvents: { code: string | null; via: string | null }[] }>(
        world.admin,
        'query($e: String!) { auditEvents(environment: $e, first: 50) { code via } }',
        { e: theirs },
      ),
    ).auditEvents.filter((e) => e.code === 'FORBIDDEN');
    expect(events).toEqual(Array(5).fill({ code: 'FORBIDDEN', via: 'mcp' }));
  });
});

describe('POST /mcp', () => {
  test('no or bad token: 401 naming the protected resource metadata (RFC 9728), which answers', async () => {
    for (const authorization of [undefined, 'Bearer pf_not_a_token']) {
      const response = await fetch(`${app.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(response.status).toBe(401);
      const challenge = response.headers.get('www-authenticate')!;
      expect(challenge).toMatch(
        new RegExp(`^Bearer resource_metadata="${app.url}/.well-known/oauth-protected-resource"`),
      );
    }
    for (const path of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
    ]) {
      const metadata = await fetch(`${app.url}${path}`);
      expect(metadata.status).toBe(200);
      expect(await metadata.json()).toMatchObject({
        resource: `${app.url}/mcp`,
        bearer_methods_supported: ['header'],
      });
    }
  });

  // proves: R29
  test('an ADMIN token is refused: agents run with least privilege', async () => {
    await expect(connectMcp(app.url, world.admin, 'http')).rejects.toThrow(
      /ADMIN tokens are refused/,
    );
  });

  test('stateless: GET and DELETE are 405', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${app.url}/mcp`, {
        method,
        headers: { authorization: `Bearer ${tokens.viewer}` },
      });
      expect(response.status).toBe(405);
    }
  });

  test('DNS rebinding: a foreign Host or Origin is refused before any tool runs', async () => {
    let challenge: string | undefined;
    let answer = '';
    const post = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const { port } = new URL(app.url);
        const req = request(
          {
            host: '127.0.0.1',
            port,
            path: '/mcp',
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              authorization: `Bearer ${tokens.viewer}`,
              ...headers,
            },
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => {
              answer = body;
              challenge = res.headers['www-authenticate'];
              resolve(res.statusCode ?? 0);
            });
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
      });
    const { host } = new URL(app.url);
    expect(await post({ host: 'evil.example:80' })).toBe(403);
    // The refusal says which setting admits the address agents use, and echoes nothing.
    expect(answer).toContain('PLANFENCE_MCP_ALLOWED_HOSTS');
    expect(answer).not.toContain('evil');
    expect(await post({ host, origin: 'http://evil.example' })).toBe(403);
    expect(answer).toContain('PLANFENCE_MCP_ALLOWED_ORIGINS');
    expect(await post({ host, origin: app.url })).toBe(200);
    expect(await post({ host: `localhost:${new URL(app.url).port}` })).toBe(200);
    // A challenge never names a foreign host.
    expect(await post({ host: 'evil.example:80', authorization: '' })).toBe(401);
    expect(challenge).toBe(
      `Bearer resource_metadata="${app.url}/.well-known/oauth-protected-resource"`,
    );
  });

  // proves: R28
  test('submit_plan without a key: a repeated call gets the same plan back; audit events say via mcp', async () => {
    const env = await freshEnvironment();
    const agent = await connect(tokens['agent-a'], 'http');
    const { generation } = await agent.ok('acquire_lease', { environment: env });
    const call = { environment: env, generation, content: 'same plan', title: 'same' };
    const first = await agent.ok('submit_plan', call);
    const again = await agent.ok('submit_plan', call);
    expect(again).toEqual(first);
    // A different title is a different call: a new plan.
    expect((await agent.ok('submit_plan', { ...call, title: 'other' })).plan.id).toBe(`${env}@1.2`);
    // GraphQL's own calls say graphql.
    ok(await world.approve(tokens.reviewer, `${env}@1.2`));
    const events = ok(
      await world.gql<{ auditEvents: { action: string; via: string | null }[] }>(
        world.admin,
        'query($e: String!) { auditEvents(environment: $e, first: 50) { action via } }',
        { e: env },
      ),
    ).auditEvents.reverse();
    expect(events).toEqual([
      { action: 'CREATE_ENVIRONMENT', via: 'graphql' },
      { action: 'ACQUIRE_LEASE', via: 'mcp' },
      { action: 'SUBMIT_PLAN', via: 'mcp' },
      { action: 'SUBMIT_PLAN', via: 'mcp' },
      { action: 'APPROVE_PLAN', via: 'graphql' },
    ]);
  });

  test('limits apply: bad input is BAD_USER_INPUT, as over GraphQL', async () => {
    const env = await freshEnvironment();
    const agent = await connect(tokens['agent-a'], 'http');
    for (const [tool, args] of [
      ['acquire_lease', { environment: env, ttlSeconds: 0 }],
      ['acquire_lease', { environment: env, waitSeconds: 301 }],
      ['acquire_lease', { environment: 'Not A Name' }],
      ['wait_for_decision', { planId: `${env}@1.1`, timeoutSeconds: 121 }],
      ['get_plan', {}],
      ['get_plan', { planId: '' }],
      ['get_plan', { planId: `${env}@1.1\u0000` }],
      ['get_plan', { planId: '\ud800' }],
      ['get_plan', { environment: `${env}\u0000` }],
      ['get_plan', { environment: 'Not A Name' }],
    ] as const) {
      const refused = refusalOf(await agent.call(tool, args));
      expect({ tool, args, code: refused.code }).toEqual({ tool, args, code: 'BAD_USER_INPUT' });
      expect(refused.text).toMatch(/^BAD_USER_INPUT: .+\. The input breaks a documented limit/);
      // A NUL or a lone surrogate is refused without being echoed back.
      expect(refused.text.includes('\u0000')).toBe(false);
      expect(refused.text).not.toMatch(/[\ud800-\udfff]/);
    }
  });

  test('a malformed call (an unknown tool, an argument of the wrong type) is refused by the protocol, naming what is wrong', async () => {
    const agent = await connect(tokens['agent-a'], 'http');
    for (const [tool, args, named] of [
      ['no_such_tool', {}, 'no_such_tool'],
      ['acquire_lease', { environment: 'prod', ttlSeconds: 'ten' }, 'ttlSeconds'],
    ] as const) {
      const result = await agent.client.request(
        { method: 'tools/call', params: { name: tool, arguments: args } },
        CallToolResultSchema,
      );
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toBeUndefined();
      const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
      expect(text).toMatch(/^MCP error -32602/);
      expect(text).toContain(named);
    }
  });

  // proves: R37
  test('acquire_lease with waitSeconds waits in the lease queue and gets the lease once its holder releases it', async () => {
    const env = await freshEnvironment();
    const a = await connect(tokens['agent-a'], 'http');
    const b = await connect(tokens['agent-b'], 'http');
    const c = await connect(tokens['agent-b'], 'http');
    const held = await a.ok('acquire_lease', { environment: env, ttlSeconds: 600 });
    const waiting = b.ok('acquire_lease', { environment: env, waitSeconds: 60 });
    // B's ticket waits (enqueued and audited) before A lets go.
    const enqueued = async () =>
      (await world.auditEvents(env)).some(
        (e) => e.action === 'ENQUEUE_LEASE' && e.outcome === 'ACCEPTED',
      );
    await until('the ticket is enqueued', enqueued);
    expect(await enqueued()).toBe(true);
    const listed = await c.ok('list_environments', {});
    expect(listed.environments.find((e: { name: string }) => e.name === env)).toMatchObject({
      queueLength: 1,
    });
    await a.ok('release_lease', { environment: env, generation: held.generation });
    // The release hands the lease to B's ticket in its own transaction (R37).
    expect(await waiting).toMatchObject({ environment: env, generation: 2, holder: 'agent-b' });
  });

  /** An `acquire_lease` call that waits in the queue, over a connection its agent can drop. */
  const waitOverDroppedConnection = (token: string, environment: string, waitSeconds: number) => {
    const leaving = new AbortController();
    const waiting = fetch(`${app.url}/mcp`, {
      method: 'POST',
      signal: leaving.signal,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'acquire_lease', arguments: { environment, waitSeconds } },
      }),
    }).catch((error: unknown) => error);
    return { leaving, waiting };
  };
  /** The accepted audit events of `action`, with the door each came through. */
  const acceptedEvents = async (environment: string, action: string) =>
    ok(
      await world.gql<{
        auditEvents: {
          action: string;
          outcome: string;
          actor: string;
          generation: number | null;
          via: string | null;
        }[];
      }>(
        world.admin,
        'query($e: String!) { auditEvents(environment: $e, first: 500) { action outcome actor generation via } }',
        { e: environment },
      ),
    ).auditEvents.filter((e) => e.action === action && e.outcome === 'ACCEPTED');

  // proves: R37
  test('an agent that leaves while acquire_lease waits has its ticket cancelled: the lease is never handed to it', async () => {
    const env = await freshEnvironment();
    const a = await connect(tokens['agent-a'], 'http');
    const held = await a.ok('acquire_lease', { environment: env, ttlSeconds: 600 });
    // Agent B's call, over a connection that B then drops (its process ends, its network goes).
    const { leaving, waiting } = waitOverDroppedConnection(tokens['agent-b'], env, 60);
    const events = (action: string) => acceptedEvents(env, action);
    await until('the ticket is enqueued', async () => (await events('ENQUEUE_LEASE')).length > 0);
    expect(await events('ENQUEUE_LEASE')).toHaveLength(1);
    leaving.abort();
    expect((await waiting) as Error).toMatchObject({ name: 'AbortError' });
    await until(
      'the ticket is cancelled',
      async () => (await events('CANCEL_LEASE_TICKET')).length > 0,
    );
    // Cancelled for the agent that left over MCP: audited through that door.
    expect(await events('CANCEL_LEASE_TICKET')).toMatchObject([{ actor: 'agent-b', via: 'mcp' }]);
    await a.ok('release_lease', { environment: env, generation: held.generation });
    const after = await a.ok('list_environments', {});
    expect(after.environments.find((e: { name: string }) => e.name === env)).toMatchObject({
      queueLength: 0,
      lease: null,
    });
  });
  // proves: R37
  test('a ticket granted in the moment its agent leaves is released at once, not held until it expires', async () => {
    const env = await freshEnvironment();
    const a = await connect(tokens['agent-a'], 'http');
    await a.ok('acquire_lease', { environment: env, ttlSeconds: 30 });
    // Only what this test does decides here: the sweeper would hand the lease off by itself.
    const sweeper = app.get(LeaseQueueSweeper);
    await sweeper.stop();
    try {
      const { leaving, waiting } = waitOverDroppedConnection(tokens['agent-b'], env, 120);
      const events = (action: string) => acceptedEvents(env, action);
      await until('the ticket is enqueued', async () => (await events('ENQUEUE_LEASE')).length > 0);
      // A's lease runs out; nothing has handed it off yet when B's connection closes, so the
      // cancellation's own transaction hands it off first (R37): B's ticket is granted there.
      world.advance(31);
      leaving.abort();
      expect((await waiting) as Error).toMatchObject({ name: 'AbortError' });
      await until(
        'the granted lease is released',
        async () => (await events('RELEASE_LEASE')).length > 0,
      );
      expect(await events('RELEASE_LEASE')).toMatchObject([
        { actor: 'agent-b', generation: 2, via: 'mcp' },
      ]);
      expect(await events('CANCEL_LEASE_TICKET')).toMatchObject([{ actor: 'agent-b', via: 'mcp' }]);
      const after = await a.ok('list_environments', {});
      expect(after.environments.find((e: { name: string }) => e.name === env)).toMatchObject({
        queueLength: 0,
        lease: null,
      });
      // The next agent gets it at once, with the generation after the one B never used.
      expect(await a.ok('acquire_lease', { environment: env })).toMatchObject({ generation: 3 });
    } finally {
      sweeper.onApplicationBootstrap();
    }
  });
});

describe('rate limits over MCP', () => {
  let limited: TestApp;
  afterAll(async () => {
    await limited?.close();
  });

  // proves: R28, R30
  test('RATE_LIMITED carries retryAfterSeconds in the tool result; content over the limit is PAYLOAD_TOO_LARGE', async () => {
    limited = await startApp({
      PLANFENCE_RATE_LEASES_PER_MINUTE: '1',
      PLANFENCE_MAX_PLAN_BYTES: '100',
    });
    const w = new World(limited);
    await w.createEnvironment('rl', 'MONOTONIC');
    const token = await w.issue('rl-agent', 'AGENT');
    const agent = await connectMcp(limited.url, token, 'http');
    try {
      await agent.ok('acquire_lease', { environment: 'rl' });
      const refused = refusalOf(await agent.call('acquire_lease', { environment: 'rl' }));
      expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
      expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(refused.text).toContain(`wait ${String(refused.retryAfterSeconds)} seconds`);
      // Plan content above PLANFENCE_MAX_PLAN_BYTES: refused, nothing stored.
      const tooLarge = refusalOf(
        await agent.call('submit_plan', {
          environment: 'rl',
          generation: 1,
          content: 'x'.repeat(101),
        }),
      );
      expect(tooLarge).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
      expect(ok(await w.gql(token, '{ plans(environment: "rl") { id } }')).plans).toEqual([]);
    } finally {
      await agent.close();
    }
  });
});

/** Runs terraform in `dir` (offline: only the built-in terraform_data, the local backend). */
function terraform(dir: string, ...args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      'terraform',
      [`-chdir=${dir}`, ...args],
      { env: { ...process.env, TF_IN_AUTOMATION: '1' }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

withTerraform('submit_plan with a Terraform plan (real terraform)', () => {
  const dir = scratchDir();
  /** `terraform show -json` of the plan, and the plan file itself. */
  let shown: string;
  let planFile: Buffer;

  beforeAll(async () => {
    writeFileSync(
      join(dir.path, 'main.tf'),
      `resource "terraform_data" "app" { input = "app-1" }
resource "terraform_data" "db" { input = "db-1" }
`,
    );
    expect(await terraform(dir.path, 'init', '-input=false', '-no-color')).toMatchObject({
      code: 0,
    });
    expect(
      await terraform(dir.path, 'plan', '-input=false', '-no-color', '-out=two.tfplan'),
    ).toMatchObject({ code: 0 });
    const show = await terraform(dir.path, 'show', '-json', 'two.tfplan');
    expect(show.code).toBe(0);
    shown = show.stdout;
    planFile = readFileSync(join(dir.path, 'two.tfplan'));
  }, 120_000);
  afterAll(() => dir.cleanup());

  // proves: R28, R49
  test.each(DOORS)(
    'over %s: the plan and its file are submitted; the result has the counts and the reviewUrl; a reviewer approves over GraphQL; the submit is audited via mcp',
    async (door) => {
      const env = await freshEnvironment('MONOTONIC', 'tf');
      const agent = await connect(tokens['agent-a'], door);
      const { generation } = await agent.ok('acquire_lease', { environment: env, ttlSeconds: 300 });
      const call = {
        environment: env,
        generation,
        title: 'app and db',
        contentType: 'TERRAFORM_PLAN_JSON',
        content: shown,
        artifact: planFile.toString('base64'),
        sourceRevision: 'c0ffee',
      };
      // The SDK's callTool checks the output against the tool's output schema.
      const result = await agent.call('submit_plan', call);
      expect(result.isError).toBeFalsy();
      const { plan } = result.structuredContent as {
        plan: { id: string; contentHash: string; reviewUrl: string };
      };
      const id = `${env}@${generation}.1`;
      expect(plan).toEqual({
        id,
        status: 'PROPOSED',
        contentHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        // The counts only: the resources themselves are get_plan's.
        summary: { add: 2, change: 0, destroy: 0, replace: 0, read: 0, noop: 0 },
        pendingApprovalRules: [{ group: null, count: 1 }],
        pendingChecks: [],
        policyResults: [],
        reviewUrl: `${app.url}/?plan=${encodeURIComponent(id)}`,
      });
      expect(textOf(result)).toContain(
        `awaits review: a person approves or rejects it at ${plan.reviewUrl}`,
      );

      // Without a key: the same call again is the same plan (R9); another source revision is
      // another call, with a key of its own, not a reused one.
      expect(await agent.ok('submit_plan', call)).toEqual({ plan });
      expect((await agent.ok('submit_plan', { ...call, sourceRevision: 'decaf' })).plan.id).toBe(
        `${env}@${generation}.2`,
      );

      // A reviewer approves the plan the agent submitted, pinned to its hash, over GraphQL.
      expect(
        ok(await world.approve(tokens.reviewer, id, { contentHash: plan.contentHash })).approvePlan
          .status,
      ).toBe('PUBLISHED');
      const read = ok(
        await world.gql<{ plan: Record<string, unknown> }>(
          tokens.reviewer,
          'query($id: ID!) { plan(id: $id) { status contentType sourceRevision artifactHash reviewUrl summary { add destroy } } }',
          { id },
        ),
      ).plan;
      expect(read).toEqual({
        status: 'PUBLISHED',
        contentType: 'TERRAFORM_PLAN_JSON',
        sourceRevision: 'c0ffee',
        artifactHash: createHash('sha256').update(planFile).digest('hex'),
        reviewUrl: plan.reviewUrl,
        summary: { add: 2, destroy: 0 },
      });
      const events = ok(
        await world.gql<{
          auditEvents: { action: string; outcome: string; planId: string | null; via: string }[];
        }>(
          world.admin,
          'query($e: String!) { auditEvents(environment: $e, first: 50) { action outcome planId via } }',
          { e: env },
        ),
      ).auditEvents.filter((e) => e.planId === id);
      expect(events).toEqual(
        expect.arrayContaining([
          { action: 'SUBMIT_PLAN', outcome: 'ACCEPTED', planId: id, via: 'mcp' },
          { action: 'APPROVE_PLAN', outcome: 'ACCEPTED', planId: id, via: 'graphql' },
        ]),
      );
    },
  );
});
