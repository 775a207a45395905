/** DESIGN §5: who may call what. Every mutation × every role, and callers without a valid token. */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, World } from './support/world.js';

let app: TestApp;
let world: World;
const tokens: Record<string, string> = {};

type Role = 'ADMIN' | 'AGENT' | 'REVIEWER' | 'VIEWER';

/** Each operation, with the roles allowed to call it. Arguments are valid but may name nothing. */
const operations: {
  name: string;
  allowed: Role[];
  query: string;
  variables: () => Record<string, unknown>;
}[] = [
  {
    name: 'issueToken',
    allowed: ['ADMIN'],
    query: 'mutation($n: String!) { issueToken(name: $n, role: VIEWER) { token } }',
    variables: () => ({ n: `p-${Math.random().toString(36).slice(2, 10)}` }),
  },
  {
    name: 'revokeToken',
    allowed: ['ADMIN'],
    query: 'mutation { revokeToken(name: "victim") { name } }',
    variables: () => ({}),
  },
  {
    name: 'createEnvironment',
    allowed: ['ADMIN'],
    query: 'mutation($n: String!) { createEnvironment(input: { name: $n }) { name } }',
    variables: () => ({ n: `e-${Math.random().toString(36).slice(2, 10)}` }),
  },
  {
    name: 'acquireLease',
    allowed: ['ADMIN', 'AGENT'],
    query:
      'mutation { acquireLease(input: { environment: "shared", ttlSeconds: 1 }) { generation } }',
    variables: () => ({}),
  },
  {
    name: 'renewLease',
    allowed: ['ADMIN', 'AGENT'],
    query:
      'mutation { renewLease(input: { environment: "shared", generation: 1 }) { generation } }',
    variables: () => ({}),
  },
  {
    name: 'releaseLease',
    allowed: ['ADMIN', 'AGENT'],
    query: 'mutation { releaseLease(input: { environment: "shared", generation: 1 }) }',
    variables: () => ({}),
  },
  {
    name: 'submitPlan',
    allowed: ['ADMIN', 'AGENT'],
    query:
      'mutation { submitPlan(input: { environment: "shared", generation: 1, idempotencyKey: "k", content: "c" }) { id } }',
    variables: () => ({}),
  },
  {
    name: 'approvePlan',
    allowed: ['ADMIN', 'REVIEWER'],
    query: 'mutation { approvePlan(input: { planId: "shared@1.1" }) { id } }',
    variables: () => ({}),
  },
  {
    name: 'rejectPlan',
    allowed: ['ADMIN', 'REVIEWER'],
    query: 'mutation { rejectPlan(input: { planId: "shared@1.1", reason: "r" }) { id } }',
    variables: () => ({}),
  },
  {
    name: 'whoami',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ whoami { name } }',
    variables: () => ({}),
  },
  {
    name: 'environments',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ environments { name } }',
    variables: () => ({}),
  },
  {
    name: 'environment',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ environment(name: "shared") { name lease { holder } currentPlan { id } } }',
    variables: () => ({}),
  },
  {
    name: 'currentPlan',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ currentPlan(environment: "shared") { id } }',
    variables: () => ({}),
  },
  {
    name: 'plan',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ plan(id: "shared@1.1") { id } }',
    variables: () => ({}),
  },
  {
    name: 'plans',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ plans(environment: "shared") { id } }',
    variables: () => ({}),
  },
  {
    name: 'auditEvents',
    allowed: ['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'],
    query: '{ auditEvents(environment: "shared") { id } }',
    variables: () => ({}),
  },
];

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  tokens.ADMIN = world.admin;
  for (const role of ['AGENT', 'REVIEWER', 'VIEWER'] as const)
    tokens[role] = await world.issue(role.toLowerCase(), role);
  await world.issue('victim', 'VIEWER');
  await world.createEnvironment('shared', 'MONOTONIC');
  tokens.REVOKED = await world.issue('gone', 'ADMIN');
  await world.gql(world.admin, 'mutation { revokeToken(name: "gone") { revokedAt } }');
});
afterAll(() => app.close());

const cases = operations.flatMap((op) =>
  (['ADMIN', 'AGENT', 'REVIEWER', 'VIEWER'] as const).map((role) => ({
    ...op,
    role,
    expected: op.allowed.includes(role),
  })),
);

test.each(cases)(
  '$name as $role: allowed=$expected',
  async ({ query, variables, role, expected }) => {
    const result = await world.gql(tokens[role], query, variables());
    const code = codeOf(result);
    if (expected) {
      expect(['FORBIDDEN', 'UNAUTHENTICATED', 'INTERNAL', 'BAD_USER_INPUT']).not.toContain(code);
    } else {
      expect(code).toBe('FORBIDDEN');
      expect(result.data).toBeNull();
    }
  },
);

const badCallers: [string, Record<string, string>][] = [
  ['no token', {}],
  ['an unknown token', { authorization: 'Bearer pf_not_a_real_token' }],
  ['a revoked token', {}],
  ['a malformed header', { authorization: 'Token abc' }],
  ['an empty bearer', { authorization: 'Bearer ' }],
  ['a basic header', { authorization: 'Basic YWRtaW46YWRtaW4=' }],
];

test.each(
  operations.flatMap((op) => badCallers.map(([who, headers]) => ({ ...op, who, headers }))),
)('$name with $who is UNAUTHENTICATED', async ({ query, variables, who, headers }) => {
  const finalHeaders =
    who === 'a revoked token' ? { authorization: `Bearer ${tokens.REVOKED}` } : headers;
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...finalHeaders },
    body: JSON.stringify({ query, variables: variables() }),
  });
  const body = (await response.json()) as {
    data: unknown;
    errors: { extensions: { code: string } }[];
  };
  expect(body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  // Nothing is answered: a non-null root field nulls `data`, a nullable one is null itself.
  expect(body.data === null || Object.values(body.data as object).every((v) => v === null)).toBe(
    true,
  );
});

test.each([
  ['Bearer ', 'no token'],
  ['Bearer', 'no token'],
  ['Token abc', 'malformed Authorization header'],
])('the header "%s" is UNAUTHENTICATED and says "%s"', async (authorization, message) => {
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization },
    body: JSON.stringify({ query: '{ whoami { name } }' }),
  });
  const body = (await response.json()) as {
    errors: { message: string; extensions: { code: string } }[];
  };
  expect(body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  expect(body.errors[0].message).toContain(message);
});

test('a refused caller changed nothing', async () => {
  const before = await world.environment('shared');
  expect(codeOf(await world.acquireRaw(tokens.VIEWER, 'shared'))).toBe('FORBIDDEN');
  expect(codeOf(await world.acquireRaw(tokens.REVOKED, 'shared'))).toBe('UNAUTHENTICATED');
  expect(await world.environment('shared')).toEqual(before);
});

test('whoami names the caller and its role; only hashes of tokens are stored', async () => {
  const result = await world.gql<{ whoami: { name: string; role: string } }>(
    tokens.REVIEWER,
    '{ whoami { name role revokedAt } }',
  );
  expect(result.data?.whoami).toEqual({ name: 'reviewer', role: 'REVIEWER', revokedAt: null });
  const rows = await app.app
    .get((await import('typeorm')).DataSource)
    .query('SELECT token_hash FROM principals');
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) {
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.values(tokens)).not.toContain(row.token_hash);
  }
});
