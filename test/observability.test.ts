/** Operators see the guard at work: /metrics and one JSON log line per request. */
// The service loads its MCP runtime on the first /mcp request; under jest's VM modules that
// lazy import links only if the test file has already loaded it (as mcp.test.ts does).
import '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startApp, type TestApp } from './support/app.js';
import { until } from './support/until.js';
import { codeOf, World } from './support/world.js';

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n').filter(Boolean))
      lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

let app: TestApp;
let world: World;
let agent: string;

beforeAll(async () => {
  app = await startApp({}, undefined, pino({ level: 'info' }, sink));
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'STRICT');
  const old = await world.acquire(agent, 'prod');
  const current = await world.acquire(agent, 'prod');
  await world.submitOk(agent, 'prod', current, 'SECRET-PLAN-CONTENT');
  expect(codeOf(await world.submit(agent, 'prod', old, 'SECRET-STALE-CONTENT'))).toBe(
    'STALE_GENERATION',
  );
});
afterAll(() => app.close());

/** The request lines logged since `from` (on `path`), once there are `count` of them. */
function requestLines(from: number, count: number, path?: string) {
  return until(`${count} request lines`, () => {
    const found = lines
      .slice(from)
      .filter((l) => l.msg === 'request' && (path === undefined || l.path === path));
    return found.length >= count && found;
  });
}

test('/metrics counts the stale rejection, the grants, and shows generation and fence', async () => {
  const response = await fetch(`${app.url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  const text = await response.text();
  expect(text).toContain(
    'planfence_decisions_total{action="SUBMIT_PLAN",outcome="REJECTED",code="STALE_GENERATION"} 1',
  );
  expect(text).toContain(
    'planfence_decisions_total{action="SUBMIT_PLAN",outcome="ACCEPTED",code=""} 1',
  );
  expect(text).toContain('planfence_lease_grants_total{environment="prod"} 2');
  expect(text).toContain('planfence_generation{environment="prod"} 2');
  expect(text).toContain('planfence_fence{environment="prod"} 2');
  expect(text).toMatch(
    /planfence_decision_duration_seconds_bucket\{le="[^"]+",action="SUBMIT_PLAN"\} \d+/,
  );
  expect(text).toContain('planfence_process_cpu_user_seconds_total');
});

test('one JSON line per request, with principal, operation and outcome; never a token or plan content', async () => {
  // The last request of beforeAll: its line is written once its answer has gone.
  await until('the stale submit is logged', () =>
    lines.some((l) => l.operation === 'submitPlan' && l.outcome === 'STALE_GENERATION'),
  );
  const requests = lines.filter((l) => l.msg === 'request');
  const stale = requests.find(
    (l) => l.operation === 'submitPlan' && l.outcome === 'STALE_GENERATION',
  );
  expect(stale).toMatchObject({
    principal: 'agent',
    status: 200,
    method: 'POST',
    path: '/graphql',
  });
  expect(typeof stale!.requestId).toBe('string');
  expect(typeof stale!.durationMs).toBe('number');
  expect(requests.find((l) => l.operation === 'submitPlan' && l.outcome === 'OK')).toBeTruthy();
  const everything = JSON.stringify(lines);
  expect(everything).not.toContain('SECRET-PLAN-CONTENT');
  expect(everything).not.toContain('SECRET-STALE-CONTENT');
  expect(everything).not.toContain(agent);
  expect(everything).not.toContain(world.admin);
});

test('an MCP request the protocol refuses is logged with its JSON-RPC outcome, not OK; a tools/call without params is -32602', async () => {
  const raw = (body: string, contentType = 'application/json') =>
    fetch(`${app.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${agent}`,
        'content-type': contentType,
        accept: 'application/json, text/event-stream',
      },
      body,
    }).then(async (response) => ({ status: response.status, body: await response.json() }));
  const rpc = async (body: Record<string, unknown>) =>
    (await raw(JSON.stringify({ jsonrpc: '2.0', ...body }))).body as {
      id: unknown;
      error?: { code: number; message: string };
    };
  const from = lines.length;
  const noParams = await rpc({ id: 7, method: 'tools/call' });
  expect(noParams).toMatchObject({
    id: 7,
    error: {
      code: -32602,
      message: 'tools/call needs params { name: string, arguments?: object }',
    },
  });
  expect((await rpc({ id: 8, method: 'tools/call', params: { name: 5 } })).error?.code).toBe(
    -32602,
  );
  expect((await rpc({ id: 9, method: 'no/such/method' })).error?.code).toBe(-32601);
  // A body that is not JSON is a JSON-RPC parse error, not the HTTP layer's own shape; an
  // empty batch is one Invalid Request (JSON-RPC 2.0 §6).
  expect(await raw('{"jsonrpc": "2.0", "id": 1, "method":')).toEqual({
    status: 400,
    body: {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: expect.stringMatching(/^Parse error: /) },
    },
  });
  expect(await raw('[]')).toEqual({
    status: 400,
    body: {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Invalid Request: an empty batch' },
    },
  });
  // A form is refused before it is read, in the transport's terms (as the MCP SDK's own).
  expect(await raw('method=tools%2Flist', 'application/x-www-form-urlencoded')).toEqual({
    status: 415,
    body: {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32000,
        message: 'Unsupported Media Type: Content-Type must be application/json',
      },
    },
  });
  const outcomes = (await requestLines(from, 6, '/mcp')).map((l) => l.outcome);
  expect(outcomes).toEqual([
    'INVALID_PARAMS',
    'INVALID_PARAMS',
    'METHOD_NOT_FOUND',
    'PARSE_ERROR',
    'INVALID_REQUEST',
    'UNSUPPORTED_MEDIA_TYPE',
  ]);
});

test('a path that cannot be decoded is answered 400 and logged like any other request', async () => {
  const from = lines.length;
  const response = await fetch(`${app.url}/js/%ff`);
  expect(response.status).toBe(400);
  expect(await response.json()).toEqual({
    statusCode: 400,
    code: 'FST_ERR_BAD_URL',
    error: 'Bad Request',
    message: "'/js/%ff' is not a valid url component",
  });
  expect(await requestLines(from, 1)).toEqual([
    expect.objectContaining({ method: 'GET', path: '/js/%ff', status: 400, outcome: 'HTTP_400' }),
  ]);
});
