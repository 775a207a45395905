/**
 * Hostile input: text that no database stores as sent, and numbers beyond what ids can
 * hold. Each is refused with BAD_USER_INPUT before anything is stored, on both databases,
 * and a rejection about an environment that does not exist leaves nothing behind that
 * would surface once it does.
 */
import { createHash } from 'node:crypto';
import { DataSource } from 'typeorm';
import { startApp, type TestApp } from '../support/app.js';
import { codeOf, ok, World } from '../support/world.js';

let app: TestApp;
let world: World;
let agent: string;
let reviewer: string;
let planId: string;

const TABLES = [
  'environments',
  'plans',
  'lease_grants',
  'audit_events',
  'idempotency_records',
  'principals',
];

/** Row counts of every table that holds what clients send: "nothing stored" means none moved. */
async function rowCounts(): Promise<Record<string, number>> {
  const db = app.get(DataSource);
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    counts[table] = Number((await db.query(`SELECT COUNT(*) AS n FROM ${table}`))[0].n);
  }
  return counts;
}

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
  await world.createEnvironment('prod', 'MONOTONIC');
  const generation = await world.acquire(agent, 'prod', 3600);
  planId = (await world.submitOk(agent, 'prod', generation, 'the plan')).id;
});
afterAll(() => app.close());

const BAD_TEXT: [string, string][] = [
  ['a NUL character', 'a\u0000b'],
  ['a lone high surrogate', 'a\uD800b'],
  ['a lone low surrogate', 'a\uDC00b'],
  ['a surrogate pair cut in half at the end', 'plan \uD83D'],
];

const submit = 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }';
const acquire =
  'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }';
const renew = 'mutation($input: RenewLeaseInput!) { renewLease(input: $input) { generation } }';
const release = 'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) }';
const approve = 'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { id } }';
const reject = 'mutation($input: RejectPlanInput!) { rejectPlan(input: $input) { id } }';
const create =
  'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }';
const issue = 'mutation($name: String!) { issueToken(name: $name, role: VIEWER) { token } }';
const revoke = 'mutation($name: String!) { revokeToken(name: $name) { name } }';

type Who = 'agent' | 'reviewer' | 'admin';
/** Every text field a client can send, each with the rest of a valid call around it. */
const TEXT_FIELDS: [string, Who, string, (bad: string) => Record<string, unknown>][] = [
  ['submitPlan.content', 'agent', submit, (bad) => ({ input: submitInput({ content: bad }) })],
  ['submitPlan.title', 'agent', submit, (bad) => ({ input: submitInput({ title: bad }) })],
  [
    'submitPlan.idempotencyKey',
    'agent',
    submit,
    (bad) => ({ input: submitInput({ idempotencyKey: bad }) }),
  ],
  [
    'submitPlan.environment',
    'agent',
    submit,
    (bad) => ({ input: submitInput({ environment: bad }) }),
  ],
  [
    'submitPlan.basedOnPlanId',
    'agent',
    submit,
    (bad) => ({ input: submitInput({ basedOnPlanId: bad }) }),
  ],
  [
    'acquireLease.instance',
    'agent',
    acquire,
    (bad) => ({ input: { environment: 'prod', instance: bad } }),
  ],
  ['acquireLease.environment', 'agent', acquire, (bad) => ({ input: { environment: bad } })],
  [
    'renewLease.environment',
    'agent',
    renew,
    (bad) => ({ input: { environment: bad, generation: 1 } }),
  ],
  [
    'releaseLease.environment',
    'agent',
    release,
    (bad) => ({ input: { environment: bad, generation: 1 } }),
  ],
  ['approvePlan.planId', 'reviewer', approve, (bad) => ({ input: { planId: bad } })],
  [
    'approvePlan.contentHash',
    'reviewer',
    approve,
    (bad) => ({ input: { planId, contentHash: bad } }),
  ],
  [
    'approvePlan.idempotencyKey',
    'reviewer',
    approve,
    (bad) => ({ input: { planId, idempotencyKey: bad } }),
  ],
  ['rejectPlan.reason', 'reviewer', reject, (bad) => ({ input: { planId, reason: bad } })],
  [
    'rejectPlan.idempotencyKey',
    'reviewer',
    reject,
    (bad) => ({ input: { planId, reason: 'no', idempotencyKey: bad } }),
  ],
  ['rejectPlan.planId', 'reviewer', reject, (bad) => ({ input: { planId: bad, reason: 'no' } })],
  ['createEnvironment.name', 'admin', create, (bad) => ({ input: { name: bad } })],
  ['issueToken.name', 'admin', issue, (bad) => ({ name: bad })],
  ['revokeToken.name', 'admin', revoke, (bad) => ({ name: bad })],
  ['plan.id', 'agent', 'query($v: ID!) { plan(id: $v) { id } }', (bad) => ({ v: bad })],
  [
    'plans.environment',
    'agent',
    'query($v: String!) { plans(environment: $v) { id } }',
    (bad) => ({ v: bad }),
  ],
  [
    'plans.after',
    'agent',
    'query($v: ID) { plans(environment: "prod", after: $v) { id } }',
    (bad) => ({ v: bad }),
  ],
  [
    'auditEvents.after',
    'agent',
    'query($v: ID) { auditEvents(environment: "prod", after: $v) { id } }',
    (bad) => ({ v: bad }),
  ],
  [
    'environment.name',
    'agent',
    'query($v: String!) { environment(name: $v) { name } }',
    (bad) => ({ v: bad }),
  ],
  [
    'currentPlan.environment',
    'agent',
    'query($v: String!) { currentPlan(environment: $v) { id } }',
    (bad) => ({ v: bad }),
  ],
];

let keys = 0;
function submitInput(overrides: Record<string, unknown>) {
  return {
    environment: 'prod',
    generation: 1,
    idempotencyKey: `inputs-${++keys}`,
    content: 'a plan',
    ...overrides,
  };
}

const tokenOf = (who: Who) =>
  who === 'agent' ? agent : who === 'reviewer' ? reviewer : world.admin;

const TEXT_CASES = TEXT_FIELDS.flatMap(([field, who, query, variables]) =>
  BAD_TEXT.map(([what, bad]) => [field, what, who, query, variables(bad)] as const),
);

test.each(TEXT_CASES)(
  '%s with %s is BAD_USER_INPUT and stores nothing',
  async (field, _what, who, query, variables) => {
    const before = await rowCounts();
    const env = await world.environment('prod');

    const result = await world.gql(tokenOf(who), query, variables);

    expect(codeOf(result)).toBe('BAD_USER_INPUT');
    expect(result.errors![0].message).toContain(field.split('.')[1]);
    expect(await rowCounts()).toEqual(before);
    expect(await world.environment('prod')).toEqual(env);
  },
);

test('the refusal names the field and never echoes the text', async () => {
  const result = await world.gql(agent, submit, {
    input: submitInput({ title: 'secret\u0000title' }),
  });
  expect(codeOf(result)).toBe('BAD_USER_INPUT');
  expect(result.errors![0].message).toContain('input.title');
  expect(result.errors![0].message).not.toContain('secret');
});

test('NUL written as an escape inside the document is refused too', async () => {
  const before = await rowCounts();
  const result = await world.gql(
    reviewer,
    `mutation { rejectPlan(input: { planId: "${planId}", reason: "no\\u0000way" }) { id } }`,
  );
  expect(codeOf(result)).toBe('BAD_USER_INPUT');
  expect(await rowCounts()).toEqual(before);
  expect((await world.plan(planId))?.status).toBe('PROPOSED');
});

test('well-formed text outside the BMP, and U+FFFD itself, are stored and hash as sent', async () => {
  const content = 'deploy 🚀 then \uFFFD and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢';
  const generation = (await world.environment('prod')).lastIssuedGeneration;
  const plan = await world.submitOk(agent, 'prod', generation, content, { title: 'ok 🚀' });
  const stored = await world.plan(plan.id);
  expect(stored?.content).toBe(content);
  expect(stored?.title).toBe('ok 🚀');
  expect(stored?.contentHash).toBe(createHash('sha256').update(content, 'utf8').digest('hex'));
});

describe('generations and sequences beyond 2^31-1', () => {
  const OUT_OF_RANGE: [string, Who, string, Record<string, unknown>][] = [
    [
      'rejectPlan of generation 9999999999',
      'reviewer',
      reject,
      {
        input: { planId: 'prod@9999999999.1', reason: 'no' },
      },
    ],
    [
      'rejectPlan of sequence 2^31',
      'reviewer',
      reject,
      {
        input: { planId: `prod@1.${2 ** 31}`, reason: 'no' },
      },
    ],
    [
      'approvePlan of generation 2^31',
      'reviewer',
      approve,
      {
        input: { planId: `prod@${2 ** 31}.1` },
      },
    ],
    [
      'submitPlan based on generation 9999999999',
      'agent',
      submit,
      {
        input: submitInput({ basedOnPlanId: 'prod@9999999999.1' }),
      },
    ],
    [
      'renewLease of generation 2^31',
      'agent',
      renew,
      {
        input: { environment: 'prod', generation: 2 ** 31 },
      },
    ],
    [
      'releaseLease of generation 2^31',
      'agent',
      release,
      {
        input: { environment: 'prod', generation: 2 ** 31 },
      },
    ],
    [
      'a plans cursor at generation 9999999999',
      'agent',
      'query { plans(environment: "prod", after: "prod@9999999999.1") { id } }',
      {},
    ],
    [
      'an audit cursor beyond 2^31-1',
      'agent',
      'query { auditEvents(environment: "prod", after: "9999999999999999") { id } }',
      {},
    ],
    [
      'rejectPlan of generation 9999999999 in an environment that does not exist',
      'reviewer',
      reject,
      { input: { planId: 'ghost@9999999999.1', reason: 'no' } },
    ],
  ];

  test.each(OUT_OF_RANGE)(
    '%s is BAD_USER_INPUT with no audit row',
    async (_name, who, query, variables) => {
      const before = await rowCounts();

      const result = await world.gql(tokenOf(who), query, variables);

      expect(codeOf(result)).toBe('BAD_USER_INPUT');
      expect(await rowCounts()).toEqual(before);
      const audit = await world.auditEvents('prod');
      expect(audit.every((e) => e.generation == null || e.generation <= 2 ** 31 - 1)).toBe(true);
    },
  );

  test('the largest generation and sequence are accepted as ids (and are simply not found)', async () => {
    const result = await world.gql(reviewer, reject, {
      input: { planId: `prod@${2 ** 31 - 1}.${2 ** 31 - 1}`, reason: 'no' },
    });
    expect(codeOf(result)).toBe('NOT_FOUND');
    const audit = await world.auditEvents('prod');
    expect(audit[0]).toMatchObject({
      action: 'REJECT_PLAN',
      code: 'NOT_FOUND',
      generation: 2 ** 31 - 1,
    });
  });
});

describe('rejections about an environment that does not exist yet', () => {
  test('leave no audit rows that the environment would inherit once created', async () => {
    const before = (await rowCounts()).audit_events;
    const attempts = [
      await world.gql(reviewer, reject, { input: { planId: 'later@2000000000.1', reason: 'no' } }),
      await world.gql(reviewer, approve, { input: { planId: 'later@7.1' } }),
      await world.gql(agent, acquire, { input: { environment: 'later' } }),
      await world.gql(agent, renew, { input: { environment: 'later', generation: 5 } }),
      await world.gql(agent, release, { input: { environment: 'later', generation: 5 } }),
      await world.gql(agent, submit, { input: submitInput({ environment: 'later' }) }),
    ];
    expect(attempts.map(codeOf)).toEqual(Array(attempts.length).fill('NOT_FOUND'));
    expect((await rowCounts()).audit_events).toBe(before);
    expect(
      codeOf(await world.gql(agent, 'query { auditEvents(environment: "later") { id } }')),
    ).toBe('NOT_FOUND');

    await world.createEnvironment('later', 'MONOTONIC');
    const generation = await world.acquire(agent, 'later', 60);

    expect(generation).toBe(1);
    const audit = await world.auditEvents('later');
    expect(audit.map((e) => [e.action, e.outcome, e.generation])).toEqual([
      ['ACQUIRE_LEASE', 'ACCEPTED', 1],
      ['CREATE_ENVIRONMENT', 'ACCEPTED', null],
    ]);
  });

  // proves: R12
  test('rejections in an environment that exists are still audited', async () => {
    const result = await world.gql(reviewer, reject, {
      input: { planId: 'prod@77.1', reason: 'no' },
    });
    expect(codeOf(result)).toBe('NOT_FOUND');
    expect((await world.auditEvents('prod'))[0]).toMatchObject({
      action: 'REJECT_PLAN',
      outcome: 'REJECTED',
      code: 'NOT_FOUND',
      generation: 77,
      planId: 'prod@77.1',
    });
  });

  test("the audit log with generations stays readable, the dashboard's way too", async () => {
    const result = await world.gql(
      world.admin,
      '{ auditEvents(environment: "prod", first: 500) { id generation planId code } }',
    );
    expect(ok(result).auditEvents.length).toBeGreaterThan(0);
  });
});
