/**
 * Hostile GraphQL requests are refused before any resolver runs, with BAD_USER_INPUT
 * naming the limit, and change nothing; the service keeps answering everyone else.
 */
import { Writable } from 'node:stream';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { pino } from 'pino';
import { ADMIN_TOKEN, codeOf, ok, startApp, type TestApp } from '../support/app.js';
import { World } from '../support/world.js';
import { metric } from '../support/metrics.js';

let app: TestApp;
let world: World;
let viewer: string;
let agent: string;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  viewer = await world.issue('viewer', 'VIEWER');
  agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC', false);
});
afterAll(() => app.close());

interface Answer {
  status: number;
  body: {
    data?: unknown;
    errors?: { message: string; extensions?: Record<string, unknown> }[];
  };
}

/** POSTs a raw body to /graphql. */
async function post(url: string, body: string, token: string | null = null): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(`${url}/graphql`, { method: 'POST', headers, body });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

const query = (text: string, variables?: Record<string, unknown>) =>
  JSON.stringify({ query: text, variables });

const LOOKUPS = [
  'planfence_authentications_total{outcome="OK"}',
  'planfence_authentications_total{outcome="UNAUTHENTICATED"}',
];
async function lookups(url: string): Promise<number> {
  let sum = 0;
  for (const sample of LOOKUPS) sum += await metric(url, sample);
  return sum;
}

function aliases(n: number, field: string): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`a${i}: ${field}`);
  return `{ ${parts.join(' ')} }`;
}

function expectLimit(answer: Answer, limit: string) {
  expect(answer.status).toBe(400);
  expect(answer.body.data ?? null).toBeNull();
  expect(answer.body.errors).toHaveLength(1);
  expect(answer.body.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit });
  expect(typeof answer.body.errors![0].extensions!.max).toBe('number');
}

test('50,000 aliases without a token are refused unread while /health answers, and no field is authenticated', async () => {
  const before = await lookups(app.url);
  const refusedBefore = await metric(
    app.url,
    'planfence_requests_refused_total{limit="queryBytes"}',
  );
  const [answer, health] = await Promise.all([
    post(app.url, query(aliases(50_000, 'whoami { name }'))),
    fetch(`${app.url}/health`),
  ]);
  expect(health.status).toBe(200);
  expectLimit(answer, 'queryBytes');
  expect(answer.body.errors![0].message).toContain('PLANFENCE_MAX_QUERY_BYTES');
  // No resolver ran: not one token lookup (the guard runs before every resolver).
  expect(await lookups(app.url)).toBe(before);
  expect(await metric(app.url, 'planfence_requests_refused_total{limit="queryBytes"}')).toBe(
    refusedBefore + 1,
  );
});

test('with the document caps raised, 50,000 aliases are refused by the token cap, then by the root-field cap, before any resolver', async () => {
  const bytesRaised = await startApp({ PLANFENCE_MAX_QUERY_BYTES: String(4 * 1024 * 1024) });
  try {
    expectLimit(await post(bytesRaised.url, query(aliases(50_000, 'whoami { name }'))), 'tokens');
    expect(await lookups(bytesRaised.url)).toBe(0);
  } finally {
    await bytesRaised.close();
  }
  const roomy = await startApp({
    PLANFENCE_MAX_QUERY_BYTES: String(4 * 1024 * 1024),
    PLANFENCE_MAX_QUERY_TOKENS: String(10_000_000),
  });
  try {
    const [answer, health] = await Promise.all([
      post(roomy.url, query(aliases(50_000, 'whoami { name }'))),
      fetch(`${roomy.url}/health`),
    ]);
    expect(health.status).toBe(200);
    expectLimit(answer, 'rootFields');
    expect(await lookups(roomy.url)).toBe(0);
    // 300,000 __typename: the same cap, before graphql-js validation compares them.
    expectLimit(await post(roomy.url, query(`{ ${'__typename '.repeat(300_000)}}`)), 'rootFields');
  } finally {
    await roomy.close();
  }
});

test('one failed authentication serves every field of a request', async () => {
  const before = await metric(
    app.url,
    'planfence_authentications_total{outcome="UNAUTHENTICATED"}',
  );
  const answer = await post(
    app.url,
    query(aliases(30, 'environment(name: "prod") { name }')),
    'pf_not_a_real_token',
  );
  expect(answer.body.errors).toHaveLength(30);
  expect(answer.body.errors!.every((e) => e.extensions?.code === 'UNAUTHENTICATED')).toBe(true);
  expect(await metric(app.url, 'planfence_authentications_total{outcome="UNAUTHENTICATED"}')).toBe(
    before + 1,
  );
});

test('5,000 acquireLease aliases are refused and burn no generation', async () => {
  const mutation = `mutation ${aliases(5000, 'acquireLease(input: { environment: "prod", ttlSeconds: 1 }) { generation }')}`;
  expectLimit(await post(app.url, query(mutation), agent), 'queryBytes');
  const roomy = mutation.slice(0, mutation.indexOf(' a40:')) + ' }';
  expectLimit(await post(app.url, query(roomy), agent), 'rootFields');
  expect((await world.environment('prod')).lastIssuedGeneration).toBe(0);
});

test('selections nested too deep, brackets nested too deep, and fragment bombs are refused', async () => {
  let deep = 'name';
  for (let i = 0; i < 20; i++) deep = `environments { ${deep} }`;
  expectLimit(await post(app.url, query(`{ ${deep} }`), viewer), 'depth');

  const brackets = `{ environment(name: ${'['.repeat(20_000)}${']'.repeat(20_000)}) { name } }`;
  const nested = await post(app.url, query(brackets), viewer);
  expectLimit(nested, 'nesting');

  // Each fragment spreads the next twice: 2^25 fields once expanded, a few lines of text.
  const fragments = Array.from(
    { length: 25 },
    (_, i) => `fragment F${i} on Environment { ...F${i + 1} ...F${i + 1} }`,
  );
  fragments.push('fragment F25 on Environment { name }');
  const bomb = `{ environments { ...F0 } } ${fragments.join(' ')}`;
  expectLimit(await post(app.url, query(bomb), viewer), 'fields');
});

test('a page of plan content times ten aliases is refused by the cost estimate; 8 such requests in parallel leave the service serving', async () => {
  const plan = await world.submitOk(
    agent,
    'prod',
    await world.acquire(agent, 'prod'),
    'c'.repeat(1000),
  );
  const page = 'plans(environment: "prod", first: 500) { id content }';
  const greedy = query(aliases(10, page));
  const answers = await Promise.all(Array.from({ length: 8 }, () => post(app.url, greedy, viewer)));
  for (const answer of answers) expectLimit(answer, 'cost');
  expect(answers[0].body.errors![0].message).toContain('PLANFENCE_MAX_QUERY_COST');
  // The page size from the variables counts too.
  const byVariable =
    'query($n: Int!) { a: plans(environment: "prod", first: $n) { content } b: plans(environment: "prod", first: $n) { content } }';
  expectLimit(await post(app.url, query(byVariable, { n: 500 }), viewer), 'cost');
  const small = await post(app.url, query(byVariable, { n: 5 }), viewer);
  expect(small.status).toBe(200);
  expect((small.body.data as { a: { content: string }[] }).a[0].content).toBe(plan.content);
  expect((await fetch(`${app.url}/health`)).status).toBe(200);
});

test('one full page of plans with content is answered; a response over the byte cap is replaced by a coded error', async () => {
  const single = await post(
    app.url,
    query('{ plans(environment: "prod", first: 500) { id content } }'),
    viewer,
  );
  expect(single.status).toBe(200);
  // Eight at once: expensive requests take turns (PLANFENCE_MAX_HEAVY_QUERIES), all are answered.
  const eight = await Promise.all(
    Array.from({ length: 8 }, () =>
      post(app.url, query('{ plans(environment: "prod", first: 500) { id content } }'), viewer),
    ),
  );
  expect(eight.map((a) => a.status)).toEqual(Array(8).fill(200));
  const tight = await startApp({ PLANFENCE_MAX_RESPONSE_BYTES: '2048' });
  try {
    const tightWorld = new World(tight);
    await tightWorld.createEnvironment('prod', 'MONOTONIC', false);
    const generation = await tightWorld.acquire(ADMIN_TOKEN, 'prod');
    const submitted = await tight.gql(
      ADMIN_TOKEN,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
      {
        input: {
          environment: 'prod',
          generation,
          idempotencyKey: 'k-1',
          content: 'd'.repeat(4000),
        },
      },
    );
    expect(ok(submitted)).toEqual({ submitPlan: { id: 'prod@1.1' } });
    const answer = await post(
      tight.url,
      query('{ plans(environment: "prod", first: 5) { content } }'),
      ADMIN_TOKEN,
    );
    expectLimit(answer, 'responseBytes');
  } finally {
    await tight.close();
  }
});

test('introspection needs a valid token, also for a document already run by an admin', async () => {
  const introspect = query('{ __schema { queryType { name } } }');
  expect(codeOf(await app.gql(ADMIN_TOKEN, '{ __schema { queryType { name } } }'))).toBe('OK');
  const anonymous = await post(app.url, introspect);
  expect(anonymous.body.data ?? null).toBeNull();
  expect(anonymous.body.errors![0].extensions!.code).toBe('UNAUTHENTICATED');
  const forged = await post(app.url, query('{ __type(name: "Plan") { name } }'), 'pf_forged');
  expect(forged.body.errors![0].extensions!.code).toBe('UNAUTHENTICATED');
  expect(ok(await app.gql(viewer, '{ __type(name: "Plan") { name } }'))).toEqual({
    __type: { name: 'Plan' },
  });
});

test('PLANFENCE_INTROSPECTION=off refuses it to everyone, =open serves it without a token', async () => {
  const off = await startApp({ PLANFENCE_INTROSPECTION: 'off' });
  const open = await startApp({ PLANFENCE_INTROSPECTION: 'open' });
  try {
    expect(codeOf(await off.gql(ADMIN_TOKEN, '{ __schema { queryType { name } } }'))).toBe(
      'FORBIDDEN',
    );
    expect(ok(await open.gql(null, '{ __schema { queryType { name } } }'))).toEqual({
      __schema: { queryType: { name: 'Query' } },
    });
    // Suggestions follow the same setting.
    const hint = await open.gql(null, '{ whoamii { name } }');
    expect(hint.errors![0].message).toContain('Did you mean');
  } finally {
    await off.close();
    await open.close();
  }
});

test('field suggestions only for a valid token', async () => {
  const anonymous = await post(app.url, query('{ whoamii { name } }'));
  expect(anonymous.status).toBe(400);
  expect(anonymous.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
  expect(anonymous.body.errors![0].message).not.toContain('Did you mean');
  const known = await post(app.url, query('{ whoamii { name } }'), viewer);
  expect(known.body.errors![0].message).toContain('Did you mean "whoami"');
});

test('client mistakes in the body are 400 BAD_USER_INPUT, never INTERNAL', async () => {
  for (const body of [
    '{"query":5}',
    '{"query":"[1,2]"}',
    '{"query":"{\\"kind\\":\\"Document\\",\\"definitions\\":5}"}',
    '{"query":{"kind":"Document"}}',
    '{"query":"{ whoami { name } }","variables":5}',
    '[]',
  ]) {
    const answer = await post(app.url, body, viewer);
    expect({ body, status: answer.status }).toEqual({ body, status: 400 });
    expect(answer.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
  }
});

test('deeply nested input never shows "Maximum call stack size exceeded"', async () => {
  const deepVariables = `{"query":${JSON.stringify('query($x: String!) { environment(name: $x) { name } }')},"variables":{"x":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`;
  const deepInput = `{"query":${JSON.stringify('mutation($i: CreateEnvironmentInput!) { createEnvironment(input: $i) { name } }')},"variables":{"i":${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}}}`;
  const deepDocument = query(
    `{ environment(name: ${'{a:'.repeat(5000)}1${'}'.repeat(5000)}) { name } }`,
  );
  for (const body of [deepVariables, deepInput, deepDocument]) {
    const answer = await post(app.url, body, ADMIN_TOKEN);
    expect(answer.status).toBe(400);
    expect(answer.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(answer.body)).not.toMatch(/call stack/i);
  }
  const names = ok(
    await app.gql<{ environments: { name: string }[] }>(viewer, '{ environments { name } }'),
  );
  expect(names.environments.map((e) => e.name)).toEqual(['prod']);
});

test('a 2 MB operationName is cut in the request log and not echoed in the answer', async () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  const logged = await startApp({}, undefined, pino({ level: 'info' }, sink));
  try {
    const name = 'x'.repeat(2_000_000);
    const answer = await post(
      logged.url,
      JSON.stringify({ query: '{ whoami { name } }', operationName: name }),
    );
    // Refused, and the answer does not echo the name back either.
    expect(answer.status).toBe(400);
    expect(answer.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(answer.body).length).toBeLessThan(2000);
    const requestLine = lines
      .map((l) => JSON.parse(l) as { msg?: string; operation?: string; path?: string })
      .find((l) => l.msg === 'request' && l.path === '/graphql');
    expect(requestLine?.operation).toMatch(/^x{200}…\(2000000 chars\)$/);
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThan(2000);
  } finally {
    await logged.close();
  }
});

test('a subscription over WebSocket with 100 aliased root fields is refused before it subscribes', async () => {
  const client = createClient({
    url: `${app.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${viewer}` },
    retryAttempts: 0,
  });
  try {
    const refusal = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: `subscription ${aliases(100, 'planPublished(environment: "prod") { id }')}` },
        { next: resolve, error: resolve, complete: () => resolve('complete') },
      );
    });
    // Refused by the first check that sees it: one root field per subscription, or the root field cap.
    expect(refusal).toEqual([
      expect.objectContaining({
        extensions: expect.objectContaining({ code: 'BAD_USER_INPUT' }),
        message: expect.stringMatching(/exactly one root field|root fields/),
      }),
    ]);
  } finally {
    await client.dispose();
  }
});
