/** DESIGN §6: every bad input gets its documented code, a readable message, and changes nothing. */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, World } from './support/world.js';

let app: TestApp;
let world: World;
let agent: string;
let reviewer: string;
let generation: number;

beforeAll(async () => {
  // The transport's body limit follows both limits: small ones keep it small.
  app = await startApp({ PLANFENCE_MAX_PLAN_BYTES: '1000', PLANFENCE_MAX_ARTIFACT_BYTES: '1000' });
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
  await world.createEnvironment('prod', 'MONOTONIC');
  generation = await world.acquire(agent, 'prod', 3600);
  expect(generation).toBe(1);
  await world.submitOk(agent, 'prod', generation, 'the plan');
});
afterAll(() => app.close());

const submit = 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }';
const acquire =
  'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }';
const approve = 'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { id } }';
const reject = 'mutation($input: RejectPlanInput!) { rejectPlan(input: $input) { id } }';
const create =
  'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }';
const long = 'x'.repeat(256);
/** The first grant in a fresh environment is generation 1 (checked in beforeAll). */
const validSubmit = () => ({
  environment: 'prod',
  generation: 1,
  idempotencyKey: `k-${Math.random()}`,
  content: 'c',
});

type Case = [string, 'agent' | 'reviewer' | 'admin', string, Record<string, unknown>, string];
const cases: Case[] = [
  [
    'generation as a string',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: 'abc' } },
    'BAD_USER_INPUT',
  ],
  [
    'generation 0',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: 0 } },
    'BAD_USER_INPUT',
  ],
  [
    'a negative generation',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: -3 } },
    'BAD_USER_INPUT',
  ],
  [
    'a generation beyond Int',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: 2 ** 31 } },
    'BAD_USER_INPUT',
  ],
  [
    'a fractional generation',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: 1.5 } },
    'BAD_USER_INPUT',
  ],
  [
    'the largest unissued generation',
    'agent',
    submit,
    { input: { ...validSubmit(), generation: 2 ** 31 - 1 } },
    'UNKNOWN_GENERATION',
  ],
  [
    'a missing content',
    'agent',
    submit,
    { input: { environment: 'prod', generation: 1, idempotencyKey: 'k' } },
    'BAD_USER_INPUT',
  ],
  [
    'content with a NUL character',
    'agent',
    submit,
    { input: { ...validSubmit(), content: 'a\u0000b' } },
    'BAD_USER_INPUT',
  ],
  [
    'an empty content',
    'agent',
    submit,
    { input: { ...validSubmit(), content: '' } },
    'BAD_USER_INPUT',
  ],
  [
    'an empty idempotency key',
    'agent',
    submit,
    { input: { ...validSubmit(), idempotencyKey: '' } },
    'BAD_USER_INPUT',
  ],
  [
    'a 256-character idempotency key',
    'agent',
    submit,
    { input: { ...validSubmit(), idempotencyKey: long } },
    'BAD_USER_INPUT',
  ],
  ['an empty title', 'agent', submit, { input: { ...validSubmit(), title: '' } }, 'BAD_USER_INPUT'],
  [
    'a 256-character title',
    'agent',
    submit,
    { input: { ...validSubmit(), title: long } },
    'BAD_USER_INPUT',
  ],
  [
    'a malformed basedOnPlanId',
    'agent',
    submit,
    { input: { ...validSubmit(), basedOnPlanId: 'latest' } },
    'BAD_USER_INPUT',
  ],
  [
    'a basedOnPlanId of another environment (it could never be current)',
    'agent',
    submit,
    { input: { ...validSubmit(), basedOnPlanId: 'staging@1.1' } },
    'BAD_USER_INPUT',
  ],
  [
    'an empty content in a policy dry run, as in a submit',
    'admin',
    'query($c: String!) { dryRunPlanPolicies(environment: "prod", content: $c) { policy } }',
    { c: '' },
    'BAD_USER_INPUT',
  ],
  [
    'content over PLANFENCE_MAX_PLAN_BYTES',
    'agent',
    submit,
    { input: { ...validSubmit(), content: 'x'.repeat(1001) } },
    'PAYLOAD_TOO_LARGE',
  ],
  [
    'multi-byte content over the byte limit',
    'agent',
    submit,
    { input: { ...validSubmit(), content: '€'.repeat(400) } },
    'PAYLOAD_TOO_LARGE',
  ],
  [
    'an unknown environment',
    'agent',
    submit,
    { input: { ...validSubmit(), environment: 'nowhere' } },
    'NOT_FOUND',
  ],
  [
    'a unicode environment name',
    'agent',
    submit,
    { input: { ...validSubmit(), environment: 'prød' } },
    'BAD_USER_INPUT',
  ],
  [
    'an SQL-looking environment name',
    'agent',
    submit,
    { input: { ...validSubmit(), environment: "prod'; DROP TABLE plans;--" } },
    'BAD_USER_INPUT',
  ],
  [
    'ttlSeconds 0',
    'agent',
    acquire,
    { input: { environment: 'prod', ttlSeconds: 0 } },
    'BAD_USER_INPUT',
  ],
  [
    'ttlSeconds 3601',
    'agent',
    acquire,
    { input: { environment: 'prod', ttlSeconds: 3601 } },
    'BAD_USER_INPUT',
  ],
  [
    'an empty instance',
    'agent',
    acquire,
    { input: { environment: 'prod', instance: '' } },
    'BAD_USER_INPUT',
  ],
  [
    'a 256-character instance',
    'agent',
    acquire,
    { input: { environment: 'prod', instance: long } },
    'BAD_USER_INPUT',
  ],
  ['an empty environment name', 'agent', acquire, { input: { environment: '' } }, 'BAD_USER_INPUT'],
  [
    'an upper-case environment name',
    'agent',
    acquire,
    { input: { environment: 'PROD' } },
    'BAD_USER_INPUT',
  ],
  [
    'a path as environment name',
    'agent',
    acquire,
    { input: { environment: '../etc' } },
    'BAD_USER_INPUT',
  ],
  [
    'a 64-character environment name',
    'agent',
    acquire,
    { input: { environment: 'a'.repeat(64) } },
    'BAD_USER_INPUT',
  ],
  [
    'acquiring an unknown environment',
    'agent',
    acquire,
    { input: { environment: 'nowhere' } },
    'NOT_FOUND',
  ],
  ['a malformed plan id', 'reviewer', approve, { input: { planId: 'prod-1' } }, 'BAD_USER_INPUT'],
  ['an unknown plan', 'reviewer', approve, { input: { planId: 'prod@99.1' } }, 'NOT_FOUND'],
  [
    'a content hash that is not sha256 hex',
    'reviewer',
    approve,
    { input: { planId: 'prod@1.1', contentHash: 'XYZ' } },
    'BAD_USER_INPUT',
  ],
  [
    'an empty rejection reason',
    'reviewer',
    reject,
    { input: { planId: 'prod@1.1', reason: '' } },
    'BAD_USER_INPUT',
  ],
  [
    'a 256-character rejection reason',
    'reviewer',
    reject,
    { input: { planId: 'prod@1.1', reason: long } },
    'BAD_USER_INPUT',
  ],
  ['an unknown mode', 'admin', create, { input: { name: 'x', mode: 'LOOSE' } }, 'BAD_USER_INPUT'],
  [
    'an SQL-looking new environment',
    'admin',
    create,
    { input: { name: "x' OR 1=1" } },
    'BAD_USER_INPUT',
  ],
  ['an existing environment', 'admin', create, { input: { name: 'prod' } }, 'ALREADY_EXISTS'],
  [
    'first 0',
    'agent',
    'query { plans(environment: "prod", first: 0) { id } }',
    {},
    'BAD_USER_INPUT',
  ],
  [
    'first 501',
    'agent',
    'query { auditEvents(environment: "prod", first: 501) { id } }',
    {},
    'BAD_USER_INPUT',
  ],
  [
    'a malformed cursor',
    'agent',
    'query { plans(environment: "prod", after: "x") { id } }',
    {},
    'BAD_USER_INPUT',
  ],
  [
    'plans of an unknown environment',
    'agent',
    'query { plans(environment: "nowhere") { id } }',
    {},
    'NOT_FOUND',
  ],
  [
    'the audit of an unknown environment',
    'agent',
    'query { auditEvents(environment: "nowhere") { id } }',
    {},
    'NOT_FOUND',
  ],
  [
    'the current plan of an unknown environment',
    'agent',
    'query { currentPlan(environment: "nowhere") { id } }',
    {},
    'NOT_FOUND',
  ],
  [
    'an unknown field',
    'agent',
    'query { plans(environment: "prod") { id secret } }',
    {},
    'BAD_USER_INPUT',
  ],
  ['a syntax error', 'agent', 'query { plans(environment: ', {}, 'BAD_USER_INPUT'],
  [
    'an unknown role',
    'admin',
    'mutation { issueToken(name: "x", role: ROOT) { token } }',
    {},
    'BAD_USER_INPUT',
  ],
  [
    'a taken principal name',
    'admin',
    'mutation { issueToken(name: "agent", role: VIEWER) { token } }',
    {},
    'ALREADY_EXISTS',
  ],
  [
    'revoking an unknown principal',
    'admin',
    'mutation { revokeToken(name: "nobody") { name } }',
    {},
    'NOT_FOUND',
  ],
];

function looksInternal(message: string): boolean {
  return /\bat .+:\d+|node_modules|SQLITE|SELECT |INSERT |UPDATE |QueryFailed|\/work\/|\.ts\b/.test(
    message,
  );
}

test.each(cases)('%s → %s', async (_name, who, query, variables, expected) => {
  const token = who === 'agent' ? agent : who === 'reviewer' ? reviewer : world.admin;
  const before = { env: await world.environment('prod'), plans: await world.plans('prod') };

  const result = await world.gql(token, query, variables);

  expect(codeOf(result)).toBe(expected);
  for (const error of result.errors ?? []) {
    expect(error.message.length).toBeGreaterThan(0);
    expect(looksInternal(error.message)).toBe(false);
  }
  expect({ env: await world.environment('prod'), plans: await world.plans('prod') }).toEqual(
    before,
  );
});

test('the message names the field that broke a limit', async () => {
  const result = await world.gql(agent, acquire, {
    input: { environment: 'prod', ttlSeconds: 9999 },
  });
  expect(result.errors![0].message).toContain('ttlSeconds');
});

test('unknown things read as null where the contract allows it', async () => {
  const result = await world.gql(
    agent,
    '{ environment(name: "nowhere") { name } plan(id: "prod@9.9") { id } }',
  );
  expect(result.data).toEqual({ environment: null, plan: null });
});

test('SQL-looking content and titles are stored verbatim', async () => {
  const content = "'); DELETE FROM plans; --\n\t ünïcödé 🚀";
  const plan = await world.submitOk(agent, 'prod', generation, content, {
    title: "Robert'); DROP TABLE plans;--",
  });
  expect((await world.plan(plan.id))?.content).toBe(content);
  expect((await world.plan(plan.id))?.title).toBe("Robert'); DROP TABLE plans;--");
});

test('a request body beyond the transport limit is PAYLOAD_TOO_LARGE in GraphQL shape', async () => {
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${agent}` },
    body: JSON.stringify({
      query: submit,
      variables: { input: { ...validSubmit(), content: 'x'.repeat(200_000) } },
    }),
  });
  expect(response.status).toBe(413);
  const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
  expect(body.errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
});

test('a body that is not JSON is BAD_USER_INPUT', async () => {
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${agent}` },
    body: '{"query": ',
  });
  expect(response.status).toBe(400);
  const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
  expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
});

test('a request without a query it can read says how to send one', async () => {
  for (const [init, status] of [
    // curl -d without -H 'content-type: application/json'
    [
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '{"query":"{ __typename }"}',
      },
      415,
    ],
    // A form as a browser posts it: never run, whatever it asks.
    [
      {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Bearer ${agent}`,
        },
        body: 'query=%7B%20__typename%20%7D',
      },
      415,
    ],
    [{ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }, 400],
    [{ method: 'GET' }, 400],
  ] as const) {
    const response = await fetch(`${app.url}/graphql`, init);
    const body = (await response.json()) as {
      data?: unknown;
      errors: { message: string; extensions: { code: string } }[];
    };
    expect({ status: response.status, code: body.errors[0].extensions.code }).toEqual({
      status,
      code: 'BAD_USER_INPUT',
    });
    expect(body.data ?? null).toBeNull();
    expect(body.errors[0].message).toContain('content-type: application/json');
  }
});

test('a subscription sent over HTTP is BAD_USER_INPUT naming WebSocket, with or without a token', async () => {
  for (const [query, operationName] of [
    ['subscription { planPublished(environment: "prod") { id } }', undefined],
    ['subscription($id: ID!) { leaseTicketChanged(id: $id) { id } }', undefined],
    ['query Q { __typename } subscription S { activityRecorded { id } }', 'S'],
  ] as const) {
    for (const headers of [
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json', authorization: `Bearer ${agent}` },
    ] as Record<string, string>[]) {
      const response = await fetch(`${app.url}/graphql`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, operationName, variables: { id: '1' } }),
      });
      const body = (await response.json()) as {
        errors: { message: string; extensions: { code: string } }[];
      };
      expect({ query, status: response.status, code: body.errors[0].extensions.code }).toEqual({
        query,
        status: 400,
        code: 'BAD_USER_INPUT',
      });
      expect(body.errors[0].message).toContain('WebSocket');
    }
  }
});

// proves: R12
test('domain rejections are audited; input errors never reached a decision', async () => {
  const events = await world.auditEvents('prod');
  const rejected = events.filter((e) => e.outcome === 'REJECTED').map((e) => e.code);
  expect(rejected).toContain('UNKNOWN_GENERATION');
  expect(rejected).not.toContain('BAD_USER_INPUT');
});
