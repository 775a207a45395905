/** R14–R17: approval rules by group, proposal expiry, freeze and break-glass. */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { Database, select } from '../src/database/database.js';
import { RetentionService } from '../src/retention/retention.service.js';
import { scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { AlreadyApprovedError, FrozenError, PlanfenceClient } from '../src/client/index.js';
import { codeOf, freshKey, ok, World } from './support/world.js';
import { subscribed } from './support/subscribed.js';
import { until } from './support/until.js';

let app: TestApp;
let world: World;
let agent: string;
let boss: string;
const reviewers: Record<string, string> = {};
let envs = 0;

const PLAN_FIELDS = `id status generation sequence submittedBy reviewedBy publishedAt expiresAt submittedAt
  approvals { approver at contentHash breakGlassReason } pendingApprovalRules { group count }`;

interface PolicyPlan {
  id: string;
  status: string;
  generation: number;
  sequence: number;
  submittedBy: string;
  reviewedBy: string | null;
  publishedAt: string | null;
  expiresAt: string | null;
  submittedAt: string;
  approvals: {
    approver: string;
    at: string;
    contentHash: string;
    breakGlassReason: string | null;
  }[];
  pendingApprovalRules: { group: string | null; count: number }[];
}

type Rule = { group: string | null; count: number };
const PLATFORM_AND_SECURITY: Rule[] = [
  { group: 'platform', count: 2 },
  { group: 'security', count: 1 },
];

async function issue(name: string, role: string, groups: string[]): Promise<string> {
  const result = await world.gql<{
    issueToken: { token: string; principal: { groups: string[] } };
  }>(
    world.admin,
    `mutation($name: String!, $role: Role!, $groups: [String!]) {
       issueToken(name: $name, role: $role, groups: $groups) { token principal { groups } } }`,
    { name, role, groups },
  );
  expect(ok(result).issueToken.principal.groups).toEqual([...groups].sort());
  return ok(result).issueToken.token;
}

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = await issue('agent', 'AGENT', ['platform']);
  // An ADMIN in both groups who also submits plans: four eyes still holds for it.
  boss = await issue('boss', 'ADMIN', ['platform', 'security']);
  for (const [name, groups] of [
    ['p1', ['platform']],
    ['p2', ['platform']],
    ['p3', ['platform']],
    ['s1', ['security']],
    ['s2', ['security']],
    ['both', ['platform', 'security']],
    ['nobody', []],
  ] as const) {
    reviewers[name] = await issue(name, 'REVIEWER', [...groups]);
  }
});
afterAll(() => app.close());

async function environment(
  input: {
    approvalRules?: Rule[];
    proposalTtlSeconds?: number;
    requireApproval?: boolean;
    mode?: 'MONOTONIC' | 'STRICT';
  } = {},
  by = agent,
): Promise<{ env: string; generation: number }> {
  const env = `pol-${++envs}`;
  ok(
    await world.gql(
      world.admin,
      'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
      { input: { name: env, ...input } },
    ),
  );
  return { env, generation: await world.acquire(by, env, 3600) };
}

async function submit(env: string, generation: number, content: string, by = agent) {
  return ok(
    await world.gql<{ submitPlan: PolicyPlan }>(
      by,
      `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${PLAN_FIELDS} } }`,
      { input: { environment: env, generation, content, idempotencyKey: freshKey() } },
    ),
  ).submitPlan;
}

function approve(token: string, planId: string, extra: Record<string, unknown> = {}) {
  return world.gql<{ approvePlan: PolicyPlan }>(
    token,
    `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN_FIELDS} } }`,
    { input: { planId, ...extra } },
  );
}

async function read(planId: string): Promise<PolicyPlan> {
  return ok(
    await world.gql<{ plan: PolicyPlan }>(
      world.admin,
      `query($id: ID!) { plan(id: $id) { ${PLAN_FIELDS} } }`,
      { id: planId },
    ),
  ).plan;
}

async function current(env: string): Promise<string | null> {
  return (await world.environment(env)).currentPlan?.id ?? null;
}

/** The stored status, as the database holds it (not what reads compute). */
async function storedStatus(planId: string): Promise<string> {
  const [row] = await app.app
    .get(Database)
    .read((m) =>
      select<{ status: string }>(m, 'SELECT status FROM plans WHERE id = :planId', { planId }),
    );
  return row.status;
}

/** The plan.expired events of `environment` in the outbox, in the order it holds them. */
async function expiryEvents(environment: string): Promise<{ planId: string; actor: string }[]> {
  return app.get(Database).read((m) =>
    select<{ planId: string; actor: string }>(
      m,
      `SELECT plan_id AS "planId", actor FROM outbox_events
       WHERE environment = :environment AND type = 'plan.expired' ORDER BY id`,
      { environment },
    ),
  );
}

function permutations<T>(items: T[]): T[][] {
  if (items.length <= 1) return [items];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

describe('rules by group (R14, R15)', () => {
  // proves: R14, R15
  test('in every order, the plan publishes exactly on the approval that completes both rules', async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY });
    for (const order of permutations(['p1', 'p2', 's1'])) {
      const plan = await submit(env, generation, `order ${order.join(' ')}`);
      expect(plan.pendingApprovalRules).toEqual(PLATFORM_AND_SECURITY);
      const before = await current(env);
      for (const [i, name] of order.entries()) {
        const answer = ok(await approve(reviewers[name], plan.id)).approvePlan;
        const approvers = order.slice(0, i + 1);
        expect(answer.approvals.map((a) => a.approver).sort()).toEqual([...approvers].sort());
        if (i < 2) {
          const platform = approvers.filter((a) => a.startsWith('p')).length;
          const security = approvers.filter((a) => a.startsWith('s')).length;
          expect({ order, step: i, status: answer.status }).toEqual({
            order,
            step: i,
            status: 'PROPOSED',
          });
          expect(answer.pendingApprovalRules).toEqual(
            [
              { group: 'platform', count: 2 - platform },
              { group: 'security', count: 1 - security },
            ].filter((rule) => rule.count > 0),
          );
          expect(answer.publishedAt).toBeNull();
          expect(await current(env)).toBe(before);
        } else {
          expect(answer).toMatchObject({ status: 'PUBLISHED', reviewedBy: name });
          expect(answer.pendingApprovalRules).toEqual([]);
          expect(await current(env)).toBe(plan.id);
        }
      }
      expect(answer_contentHashes(await read(plan.id))).toBe(true);
    }
  });

  // proves: R14
  test('one principal in both groups counts toward both rules', async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY });
    const plan = await submit(env, generation, 'both groups');
    const first = ok(await approve(reviewers.both, plan.id)).approvePlan;
    expect(first.status).toBe('PROPOSED');
    expect(first.pendingApprovalRules).toEqual([{ group: 'platform', count: 1 }]);
    const second = ok(await approve(reviewers.p1, plan.id)).approvePlan;
    expect(second.status).toBe('PUBLISHED');
    expect(await current(env)).toBe(plan.id);
  });

  // proves: R14
  test('an approver outside every rule group is recorded but counts for nothing', async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY });
    const plan = await submit(env, generation, 'nobody');
    const answer = ok(await approve(reviewers.nobody, plan.id)).approvePlan;
    expect(answer.status).toBe('PROPOSED');
    expect(answer.approvals.map((a) => a.approver)).toEqual(['nobody']);
    expect(answer.pendingApprovalRules).toEqual(PLATFORM_AND_SECURITY);
  });

  // proves: R13, R14
  test("the submitter's own approval is SELF_APPROVAL, and its groups never count", async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY }, boss);
    const plan = await submit(env, generation, 'by the boss', boss);
    const self = await approve(boss, plan.id);
    expect(codeOf(self)).toBe('SELF_APPROVAL');
    // boss is in platform and security: were it counted, p1 and s1 would publish.
    expect(ok(await approve(reviewers.p1, plan.id)).approvePlan.status).toBe('PROPOSED');
    const afterS1 = ok(await approve(reviewers.s1, plan.id)).approvePlan;
    expect(afterS1.status).toBe('PROPOSED');
    expect(afterS1.pendingApprovalRules).toEqual([{ group: 'platform', count: 1 }]);
    expect(ok(await approve(reviewers.p2, plan.id)).approvePlan.status).toBe('PUBLISHED');
    const audit = await world.auditEvents(env);
    expect(audit.find((e) => e.code === 'SELF_APPROVAL')).toMatchObject({
      action: 'APPROVE_PLAN',
      outcome: 'REJECTED',
      actor: 'boss',
    });
  });

  // proves: R14
  test('a second approval by the same principal is ALREADY_APPROVED and changes nothing', async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY });
    const plan = await submit(env, generation, 'twice');
    ok(await approve(reviewers.p1, plan.id));
    const again = await approve(reviewers.p1, plan.id);
    expect(codeOf(again)).toBe('ALREADY_APPROVED');
    expect(again.errors![0].extensions).toEqual({ code: 'ALREADY_APPROVED' });
    const stored = await read(plan.id);
    expect(stored.approvals.map((a) => a.approver)).toEqual(['p1']);
    expect(stored.pendingApprovalRules).toEqual(
      PLATFORM_AND_SECURITY.map((r, i) => (i === 0 ? { ...r, count: 1 } : r)),
    );
  });

  // proves: R2, R15
  test('20 concurrent approvals by 20 eligible reviewers publish exactly once; every other answer is coherent', async () => {
    const rules = [
      { group: 'quorum-a', count: 4 },
      { group: 'quorum-b', count: 3 },
    ];
    const crowd: { name: string; token: string }[] = [];
    for (let i = 0; i < 20; i++) {
      const name = `crowd-${i}`;
      crowd.push({ name, token: await issue(name, 'REVIEWER', [i % 2 ? 'quorum-a' : 'quorum-b']) });
    }
    const { env, generation } = await environment({ approvalRules: rules });
    const plan = await submit(env, generation, 'crowded');

    const answers = await Promise.all(crowd.map(({ token }) => approve(token, plan.id)));

    const published = answers.filter((a) => a.data?.approvePlan.status === 'PUBLISHED');
    const proposed = answers.filter((a) => a.data?.approvePlan.status === 'PROPOSED');
    const late = answers.filter((a) => codeOf(a) === 'INVALID_PLAN_STATE');
    expect(published).toHaveLength(1);
    expect(published.length + proposed.length + late.length).toBe(20);
    for (const answer of proposed) {
      expect(answer.data!.approvePlan.pendingApprovalRules.length).toBeGreaterThan(0);
    }
    for (const answer of late) {
      expect(answer.errors![0].extensions).toEqual({
        code: 'INVALID_PLAN_STATE',
        status: 'PUBLISHED',
      });
    }
    const stored = await read(plan.id);
    expect(stored.status).toBe('PUBLISHED');
    // Exactly the accepted approvals are recorded, and they meet the rules exactly at the last one.
    expect(stored.approvals).toHaveLength(published.length + proposed.length);
    const counted = (group: string) =>
      stored.approvals.filter(
        (a) => Number(a.approver.split('-')[1]) % 2 === (group === 'quorum-a' ? 1 : 0),
      ).length;
    expect(counted('quorum-a')).toBeGreaterThanOrEqual(4);
    expect(counted('quorum-b')).toBeGreaterThanOrEqual(3);
    expect(counted('quorum-a') === 4 || counted('quorum-b') === 3).toBe(true);
    expect(stored.reviewedBy).toBe(published[0].data!.approvePlan.reviewedBy);
    expect(await current(env)).toBe(plan.id);
  });

  // proves: R14
  test('the default policy is one approval by anyone but the submitter', async () => {
    const { env, generation } = await environment();
    const state = ok(
      await world.gql<{
        environment: { approvalRules: Rule[]; proposalTtlSeconds: number | null; freeze: null };
      }>(
        world.admin,
        'query($n: String!) { environment(name: $n) { approvalRules { group count } proposalTtlSeconds freeze { reason } } }',
        { n: env },
      ),
    ).environment;
    expect(state).toEqual({
      approvalRules: [{ group: null, count: 1 }],
      proposalTtlSeconds: null,
      freeze: null,
    });
    const plan = await submit(env, generation, 'default');
    expect(plan.expiresAt).toBeNull();
    expect(ok(await approve(reviewers.nobody, plan.id)).approvePlan.status).toBe('PUBLISHED');
  });

  // proves: R15
  test('changing the rules applies to the next decision; the change is audited', async () => {
    const { env, generation } = await environment({
      approvalRules: [{ group: 'platform', count: 2 }],
    });
    const plan = await submit(env, generation, 'rules change under it');
    ok(await approve(reviewers.p1, plan.id));
    const updated = ok(
      await world.gql<{
        updateEnvironmentPolicy: { approvalRules: Rule[]; proposalTtlSeconds: number };
      }>(
        world.admin,
        `mutation($input: UpdateEnvironmentPolicyInput!) {
           updateEnvironmentPolicy(input: $input) { approvalRules { group count } proposalTtlSeconds } }`,
        {
          input: {
            environment: env,
            approvalRules: [{ group: 'security', count: 1 }],
            proposalTtlSeconds: 60,
          },
        },
      ),
    ).updateEnvironmentPolicy;
    expect(updated).toEqual({
      approvalRules: [{ group: 'security', count: 1 }],
      proposalTtlSeconds: 60,
    });
    // p1's approval counts for nothing under the new rule; s1's completes it.
    expect((await read(plan.id)).pendingApprovalRules).toEqual([{ group: 'security', count: 1 }]);
    expect(ok(await approve(reviewers.p2, plan.id)).approvePlan.status).toBe('PROPOSED');
    expect(ok(await approve(reviewers.s1, plan.id)).approvePlan.status).toBe('PUBLISHED');
    const audit = await world.auditEvents(env);
    expect(audit.find((e) => e.action === 'UPDATE_POLICY')).toMatchObject({
      outcome: 'ACCEPTED',
      actor: 'admin',
    });
    expect(
      codeOf(
        await world.gql(
          reviewers.p1,
          'mutation { updateEnvironmentPolicy(input: { environment: "nowhere" }) { name } }',
        ),
      ),
    ).toBe('FORBIDDEN');
    expect(
      codeOf(
        await world.gql(
          world.admin,
          'mutation { updateEnvironmentPolicy(input: { environment: "nowhere" }) { name } }',
        ),
      ),
    ).toBe('NOT_FOUND');
  });

  test('policies outside the limits are BAD_USER_INPUT', async () => {
    const create = (input: Record<string, unknown>) =>
      world.gql(
        world.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        {
          input: { name: `bad-${++envs}`, ...input },
        },
      );
    for (const input of [
      { approvalRules: [] },
      { approvalRules: Array.from({ length: 11 }, (_, i) => ({ group: `g${i}`, count: 1 })) },
      { approvalRules: [{ group: 'platform', count: 0 }] },
      { approvalRules: [{ group: 'platform', count: 11 }] },
      { approvalRules: [{ group: 'Not A Name', count: 1 }] },
      {
        approvalRules: [
          { group: 'platform', count: 1 },
          { group: 'platform', count: 2 },
        ],
      },
      { proposalTtlSeconds: 0 },
      { proposalTtlSeconds: 2_592_001 },
    ]) {
      expect({ input, code: codeOf(await create(input)) }).toEqual({
        input,
        code: 'BAD_USER_INPUT',
      });
    }
    expect(
      codeOf(
        await create({ approvalRules: [{ group: 'platform' }], proposalTtlSeconds: 2_592_000 }),
      ),
    ).toBe('OK');
    const tooMany = Array.from({ length: 21 }, (_, i) => `g${i}`);
    expect(
      codeOf(
        await world.gql(
          world.admin,
          'mutation($g: [String!]!) { setPrincipalGroups(name: "p3", groups: $g) { name } }',
          { g: tooMany },
        ),
      ),
    ).toBe('BAD_USER_INPUT');
  });
});

test('setPrincipalGroups replaces the groups (ADMIN only); whoami shows them', async () => {
  const token = await issue('mover', 'REVIEWER', ['platform']);
  const set = (groups: string[], by = world.admin) =>
    world.gql<{ setPrincipalGroups: { name: string; groups: string[] } }>(
      by,
      'mutation($g: [String!]!) { setPrincipalGroups(name: "mover", groups: $g) { name groups } }',
      { g: groups },
    );
  expect(ok(await set(['security', 'audit', 'security'])).setPrincipalGroups.groups).toEqual([
    'audit',
    'security',
  ]);
  expect(
    ok(await world.gql<{ whoami: { groups: string[] } }>(token, '{ whoami { groups } }')).whoami
      .groups,
  ).toEqual(['audit', 'security']);
  expect(codeOf(await set(['platform'], token))).toBe('FORBIDDEN');
  expect(
    codeOf(
      await world.gql(
        world.admin,
        'mutation { setPrincipalGroups(name: "ghost", groups: []) { name } }',
      ),
    ),
  ).toBe('NOT_FOUND');
  const { env, generation } = await environment({
    approvalRules: [{ group: 'security', count: 1 }],
  });
  const plan = await submit(env, generation, 'mover counts as security now');
  expect(ok(await approve(token, plan.id)).approvePlan.status).toBe('PUBLISHED');
});

// proves: R8, R15
test('a plan fenced with 1 of 2 approvals reads OBSOLETE, its approvals void; approving is STALE_GENERATION', async () => {
  const { env, generation } = await environment({ approvalRules: [{ group: null, count: 2 }] });
  const plan = await submit(env, generation, 'half approved');
  expect(ok(await approve(reviewers.p1, plan.id)).approvePlan.pendingApprovalRules).toEqual([
    { group: null, count: 1 },
  ]);
  const next = await world.acquire(agent, env, 3600);
  await submit(env, next, 'newer generation');

  const fenced = await read(plan.id);
  expect(fenced.status).toBe('OBSOLETE');
  expect(fenced.pendingApprovalRules).toEqual([{ group: null, count: 2 }]);
  const late = await approve(reviewers.p2, plan.id);
  expect(codeOf(late)).toBe('STALE_GENERATION');
  expect(late.errors![0].extensions).toEqual({ code: 'STALE_GENERATION', generation, fence: next });
  expect(await current(env)).toBeNull();
});

describe('expiry (R16)', () => {
  // proves: R11, R16
  test('TTL 600 s: approvable at 599 s, EXPIRED at 600 s, and never published by any path', async () => {
    const { env, generation } = await environment({
      approvalRules: [{ group: 'platform', count: 2 }],
      proposalTtlSeconds: 600,
    });
    const plan = await submit(env, generation, 'expires');
    expect(new Date(plan.expiresAt!).getTime() - new Date(plan.submittedAt).getTime()).toBe(
      600_000,
    );

    world.advance(599);
    expect(ok(await approve(reviewers.p1, plan.id)).approvePlan.status).toBe('PROPOSED');
    world.advance(1);

    // Reads show EXPIRED from this instant, before any write stored it.
    expect((await read(plan.id)).status).toBe('EXPIRED');
    expect(await storedStatus(plan.id)).toBe('PROPOSED');
    expect((await world.plans(env, 'EXPIRED')).map((p) => p.id)).toEqual([plan.id]);
    expect(await world.plans(env, 'PROPOSED')).toEqual([]);
    expect(
      ok(
        await world.gql<{ reviewQueue: { id: string }[] }>(reviewers.p2, '{ reviewQueue { id } }'),
      ).reviewQueue.map((p) => p.id),
    ).not.toContain(plan.id);

    for (const [token, extra] of [
      [reviewers.p2, {}],
      [world.admin, { breakGlassReason: 'ship it anyway' }],
    ] as const) {
      const refused = await approve(token, plan.id, extra);
      expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
      expect(refused.errors![0].extensions).toEqual({
        code: 'INVALID_PLAN_STATE',
        status: 'EXPIRED',
      });
    }
    expect(await storedStatus(plan.id)).toBe('EXPIRED');
    expect(codeOf(await world.reject(reviewers.p2, plan.id, 'too late'))).toBe(
      'INVALID_PLAN_STATE',
    );
    expect(await current(env)).toBeNull();
    expect((await read(plan.id)).pendingApprovalRules).toEqual([{ group: 'platform', count: 2 }]);
  });

  // proves: R16
  test('the single approval of the default policy at the expiry instant is refused too', async () => {
    const { env, generation } = await environment({ proposalTtlSeconds: 600 });
    const plan = await submit(env, generation, 'default policy expires');
    world.advance(600);
    expect(codeOf(await approve(reviewers.p1, plan.id))).toBe('INVALID_PLAN_STATE');
    expect(await current(env)).toBeNull();
  });

  // proves: R16, R22
  test('every write in the environment and the retention job store EXPIRED, each announced once, by planfence', async () => {
    const { env, generation } = await environment({ proposalTtlSeconds: 10 });
    const other = await environment({ proposalTtlSeconds: 10 });
    const byLease = await submit(env, generation, 'stored by a lease renewal');
    // Eleven: the ids' text order (…1, …10, …11, …2) is not the order they were submitted in.
    const byRetention: Awaited<ReturnType<typeof submit>>[] = [];
    for (let i = 1; i <= 11; i++) {
      byRetention.push(await submit(other.env, other.generation, `stored by retention ${i}`));
    }
    world.advance(10);
    ok(await world.renew(agent, env, generation, 3600));
    expect(await storedStatus(byLease.id)).toBe('EXPIRED');
    expect(await expiryEvents(env)).toEqual([{ planId: byLease.id, actor: 'planfence' }]);
    // A write stores the expiries of its own environment only.
    for (const plan of byRetention) expect(await storedStatus(plan.id)).toBe('PROPOSED');
    expect(await expiryEvents(other.env)).toEqual([]);

    await app.get(RetentionService).purge();
    for (const plan of byRetention) expect(await storedStatus(plan.id)).toBe('EXPIRED');
    // In the order submitted, whatever order the database returned them in.
    expect(await expiryEvents(other.env)).toEqual(
      byRetention.map((plan) => ({ planId: plan.id, actor: 'planfence' })),
    );
    await app.get(RetentionService).purge();
    expect(await expiryEvents(env)).toHaveLength(1);
    expect(await expiryEvents(other.env)).toHaveLength(11);
  });

  // proves: R16
  test('a new TTL applies to plans submitted from then on', async () => {
    const { env, generation } = await environment({ proposalTtlSeconds: 60 });
    const early = await submit(env, generation, 'under the old ttl');
    ok(
      await world.gql(
        world.admin,
        'mutation($e: String!) { updateEnvironmentPolicy(input: { environment: $e, proposalTtlSeconds: null }) { name } }',
        { e: env },
      ),
    );
    const late = await submit(env, generation, 'no ttl');
    expect(late.expiresAt).toBeNull();
    world.advance(60);
    expect((await read(early.id)).status).toBe('EXPIRED');
    expect(ok(await approve(reviewers.p1, late.id)).approvePlan.status).toBe('PUBLISHED');
  });
});

describe('freeze and break-glass (R17)', () => {
  // proves: R17
  test('while frozen, the completing approval and auto-publication are FROZEN; everything else goes on', async () => {
    const { env, generation } = await environment({
      approvalRules: [{ group: 'platform', count: 2 }],
    });
    const frozen = ok(
      await world.gql<{
        freezeEnvironment: { freeze: { reason: string; frozenBy: string; frozenAt: string } };
      }>(
        world.admin,
        'mutation($e: String!) { freezeEnvironment(environment: $e, reason: "release week") { freeze { reason frozenBy frozenAt } } }',
        { e: env },
      ),
    ).freezeEnvironment.freeze;
    expect(frozen).toMatchObject({ reason: 'release week', frozenBy: 'admin' });

    const next = await world.acquire(agent, env, 3600);
    expect(next).toBe(generation + 1);
    const plan = await submit(env, next, 'during the freeze');
    const doomed = await submit(env, next, 'to be rejected');
    expect(ok(await world.reject(reviewers.p3, doomed.id, 'no')).rejectPlan.status).toBe(
      'REJECTED',
    );
    expect(ok(await approve(reviewers.p1, plan.id)).approvePlan.status).toBe('PROPOSED');
    const final = await approve(reviewers.p2, plan.id);
    expect(codeOf(final)).toBe('FROZEN');
    expect(final.errors![0].extensions).toEqual({
      code: 'FROZEN',
      reason: 'release week',
      frozenBy: 'admin',
    });
    expect((await read(plan.id)).approvals.map((a) => a.approver)).toEqual(['p1']);

    const auto = await environment({ requireApproval: false });
    ok(
      await world.gql(
        world.admin,
        'mutation($e: String!) { freezeEnvironment(environment: $e, reason: "incident 42") { name } }',
        { e: auto.env },
      ),
    );
    const refused = await world.submit(agent, auto.env, auto.generation, 'auto');
    expect(codeOf(refused)).toBe('FROZEN');
    expect(refused.errors![0].extensions).toEqual({
      code: 'FROZEN',
      reason: 'incident 42',
      frozenBy: 'admin',
    });
    expect(await world.plans(auto.env)).toEqual([]);

    const thawed = ok(
      await world.gql<{ unfreezeEnvironment: { freeze: null } }>(
        world.admin,
        'mutation($e: String!) { unfreezeEnvironment(environment: $e) { freeze { reason } } }',
        { e: env },
      ),
    ).unfreezeEnvironment;
    expect(thawed.freeze).toBeNull();
    expect(ok(await approve(reviewers.p2, plan.id)).approvePlan.status).toBe('PUBLISHED');
    const actions = (await world.auditEvents(env)).map((e) =>
      `${e.action} ${e.outcome} ${e.code ?? ''}`.trim(),
    );
    expect(actions).toEqual(
      expect.arrayContaining([
        'FREEZE ACCEPTED',
        'UNFREEZE ACCEPTED',
        'APPROVE_PLAN REJECTED FROZEN',
      ]),
    );
    expect(
      codeOf(
        await world.gql(
          reviewers.p1,
          'mutation { freezeEnvironment(environment: "x", reason: "r") { name } }',
        ),
      ),
    ).toBe('FORBIDDEN');
  });

  // proves: R17
  test("an ADMIN's break-glass publishes despite freeze and rules, audited and announced with the reason", async () => {
    const { env, generation } = await environment({ approvalRules: PLATFORM_AND_SECURITY });
    ok(
      await world.gql(
        world.admin,
        'mutation($e: String!) { freezeEnvironment(environment: $e, reason: "change freeze") { name } }',
        { e: env },
      ),
    );
    const plan = await submit(env, generation, 'hotfix');
    const client: Client = createClient({
      url: `${app.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${world.admin}` },
      lazy: false,
      retryAttempts: 0,
    });
    const received: {
      planPublished: {
        id: string;
        approvals: { approver: string; breakGlassReason: string | null }[];
      };
    }[] = [];
    await subscribed(app.url, 'planPublished', () =>
      client.subscribe(
        {
          query:
            'subscription($e: String!) { planPublished(environment: $e) { id approvals { approver breakGlassReason } } }',
          variables: { e: env },
        },
        {
          next: (value) => void received.push(value.data as never),
          error: () => undefined,
          complete: () => undefined,
        },
      ),
    );
    try {
      const forbidden = await approve(reviewers.both, plan.id, { breakGlassReason: 'I am sure' });
      expect(codeOf(forbidden)).toBe('FORBIDDEN');
      expect((await read(plan.id)).approvals).toEqual([]);

      const broken = ok(
        await approve(world.admin, plan.id, { breakGlassReason: 'outage: roll back now' }),
      ).approvePlan;
      expect(broken).toMatchObject({ status: 'PUBLISHED', reviewedBy: 'admin' });
      expect(broken.approvals).toEqual([
        expect.objectContaining({ approver: 'admin', breakGlassReason: 'outage: roll back now' }),
      ]);
      expect(await current(env)).toBe(plan.id);
      const audit = await world.gql<{
        auditEvents: {
          action: string;
          outcome: string;
          code: string | null;
          actor: string;
          detail: string | null;
        }[];
      }>(
        world.admin,
        'query($e: String!) { auditEvents(environment: $e) { action outcome code actor detail } }',
        { e: env },
      );
      const events = ok(audit).auditEvents;
      expect(
        events.find((e) => e.action === 'APPROVE_PLAN' && e.outcome === 'ACCEPTED'),
      ).toMatchObject({
        actor: 'admin',
        detail: 'published by break-glass: outage: roll back now',
      });
      expect(events.find((e) => e.code === 'FORBIDDEN')).toMatchObject({
        actor: 'both',
        action: 'APPROVE_PLAN',
      });
      await until('the publication to reach the subscriber', () => received.length > 0);
      expect(received).toEqual([
        {
          planPublished: {
            id: plan.id,
            approvals: [{ approver: 'admin', breakGlassReason: 'outage: roll back now' }],
          },
        },
      ]);
    } finally {
      await client.dispose();
    }
  });

  // proves: R17
  test('break-glass never overrides the fence, four eyes or expiry', async () => {
    const { env, generation } = await environment({ proposalTtlSeconds: 600 }, boss);
    ok(
      await world.gql(
        world.admin,
        'mutation($e: String!) { freezeEnvironment(environment: $e, reason: "frozen") { name } }',
        { e: env },
      ),
    );
    const own = await submit(env, generation, 'own plan', boss);
    expect(codeOf(await approve(boss, own.id, { breakGlassReason: 'mine' }))).toBe('SELF_APPROVAL');

    const stale = await submit(env, generation, 'will be fenced', boss);
    const next = await world.acquire(boss, env, 3600);
    await submit(env, next, 'newer', boss);
    const refused = await approve(world.admin, stale.id, { breakGlassReason: 'force the old one' });
    expect(codeOf(refused)).toBe('STALE_GENERATION');
    expect(refused.errors![0].extensions).toEqual({
      code: 'STALE_GENERATION',
      generation,
      fence: next,
    });
    expect(await current(env)).toBeNull();
  });
});

test('reviewQueue: PROPOSED plans the caller may approve now, oldest first, across environments', async () => {
  const a = await environment({ approvalRules: [{ group: 'security', count: 1 }] });
  const b = await environment({ approvalRules: [{ group: 'platform', count: 2 }] });
  const older = await submit(a.env, a.generation, 'needs security');
  world.advance(1);
  const newer = await submit(b.env, b.generation, 'needs platform');
  const queue = async (token: string) =>
    ok(
      await world.gql<{ reviewQueue: { id: string }[] }>(
        token,
        '{ reviewQueue(first: 500) { id } }',
      ),
    )
      .reviewQueue.map((p) => p.id)
      .filter((id) => id === older.id || id === newer.id);

  expect(await queue(reviewers.both)).toEqual([older.id, newer.id]);
  expect(await queue(reviewers.s2)).toEqual([older.id]);
  expect(await queue(reviewers.p3)).toEqual([newer.id]);
  expect(await queue(reviewers.nobody)).toEqual([]);
  ok(await approve(reviewers.p3, newer.id));
  expect(await queue(reviewers.p3)).toEqual([]);
  expect(await queue(reviewers.both)).toEqual([older.id, newer.id]);
  ok(await approve(reviewers.s2, older.id));
  expect(await queue(reviewers.both)).toEqual([newer.id]);
  expect(codeOf(await world.gql(agent, '{ reviewQueue { id } }'))).toBe('FORBIDDEN');
});

function answer_contentHashes(plan: PolicyPlan): boolean {
  return plan.approvals.every((approval) => /^[0-9a-f]{64}$/.test(approval.contentHash));
}

// The command line is a client of the service's HTTP API, the same whatever database the
// service runs on: it is proven once, in the SQLite project.
(TEST_DATABASE === 'sqlite' ? describe : describe.skip)('the client and the command line', () => {
  const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
  const planfence = (token: string, ...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env = { ...process.env, PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token };
      execFile(process.execPath, [BIN, ...args], { env }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });

  test('the client throws AlreadyApprovedError and FrozenError, typed', async () => {
    const admin = new PlanfenceClient({ url: app.url, token: world.admin });
    const p1 = new PlanfenceClient({ url: app.url, token: reviewers.p1 });
    const policy = await admin.createEnvironmentWithPolicy({
      name: `pol-${++envs}`,
      approvalRules: [{ group: 'platform', count: 2 }],
      proposalTtlSeconds: 3600,
    });
    expect(policy).toMatchObject({
      approvalRules: [{ group: 'platform', count: 2 }],
      proposalTtlSeconds: 3600,
      freeze: null,
    });
    const generation = await world.acquire(agent, policy.name, 3600);
    const plan = await submit(policy.name, generation, 'client');
    const first = await p1.review(plan.id);
    expect(first.pendingApprovalRules).toEqual([{ group: 'platform', count: 1 }]);
    await expect(p1.review(plan.id)).rejects.toBeInstanceOf(AlreadyApprovedError);
    await admin.freezeEnvironment(policy.name, 'audit week');
    const frozen = await new PlanfenceClient({ url: app.url, token: reviewers.p2 })
      .review(plan.id)
      .catch((error: unknown) => error);
    expect(frozen).toBeInstanceOf(FrozenError);
    expect(frozen).toMatchObject({ reason: 'audit week', frozenBy: 'admin' });
    const broken = await admin.review(plan.id, { breakGlassReason: 'approved by the CAB' });
    expect(broken.status).toBe('PUBLISHED');
    expect((await admin.unfreezeEnvironment(policy.name)).freeze).toBeNull();
  });

  test('env policy, freeze, token issue --group, plan queue and plan approve --break-glass', async () => {
    const env = `cli-pol-${++envs}`;
    ok(
      await world.gql(
        world.admin,
        `mutation { createEnvironment(input: { name: "${env}" }) { name } }`,
      ),
    );
    const set = await planfence(
      world.admin,
      'env',
      'policy',
      env,
      '--rule',
      'platform:2',
      '--rule',
      'security:1',
      '--ttl',
      '600',
      '--json',
    );
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      approvalRules: PLATFORM_AND_SECURITY,
      proposalTtlSeconds: 600,
    });
    const issued = await planfence(
      world.admin,
      'token',
      'issue',
      'cli-reviewer',
      'REVIEWER',
      '--group',
      'platform',
      '--json',
    );
    expect(issued.code).toBe(0);
    const reviewer = (JSON.parse(issued.stdout) as { token: string }).token;

    const generation = await world.acquire(agent, env, 3600);
    const dir = scratchDir();
    const file = join(dir.path, 'plan.txt');
    writeFileSync(file, 'scale web to 8');
    const submitted = await planfence(
      agent,
      'plan',
      'submit',
      env,
      String(generation),
      '--file',
      file,
      '--json',
    );
    dir.cleanup();
    const planId = (JSON.parse(submitted.stdout) as { id: string }).id;

    const queue = await planfence(reviewer, 'plan', 'queue');
    expect(queue.code).toBe(0);
    expect(queue.stdout).toContain(planId);
    expect(queue.stdout).toContain('platform:2, security:1');
    const partial = await planfence(reviewer, 'plan', 'approve', planId);
    expect(partial).toMatchObject({
      code: 0,
      stdout: `${planId} PROPOSED: approval recorded; still needed: platform:1, security:1\n`,
    });
    const again = await planfence(reviewer, 'plan', 'approve', planId);
    expect(again.code).toBe(3);
    expect(again.stderr).toContain('ALREADY_APPROVED');

    const frozen = await planfence(world.admin, 'env', 'freeze', env, '--reason', 'quarter close');
    expect(frozen.code).toBe(0);
    expect(frozen.stdout).toContain('by admin');
    expect(frozen.stdout).toContain('quarter close');
    const forbidden = await planfence(
      reviewers.both,
      'plan',
      'approve',
      planId,
      '--break-glass',
      'hotfix',
    );
    expect(forbidden.code).toBe(3);
    expect(forbidden.stderr).toContain('FORBIDDEN');
    const blocked = await planfence(reviewers.both, 'plan', 'approve', planId);
    expect(blocked.code).toBe(7);
    expect(blocked.stderr).toContain('FROZEN');
    expect(blocked.stderr).toContain('reason=quarter close');
    const broken = await planfence(
      world.admin,
      'plan',
      'approve',
      planId,
      '--break-glass',
      'INC-1: capacity',
    );
    expect(broken).toMatchObject({
      code: 0,
      stdout: `${planId} PUBLISHED, approved by admin (break-glass)\n`,
    });
    const thawed = await planfence(world.admin, 'env', 'unfreeze', env, '--json');
    expect(JSON.parse(thawed.stdout)).toMatchObject({ freeze: null });
    const bad = await planfence(world.admin, 'env', 'policy', env, '--rule', 'platform');
    expect(bad.code).toBe(2);
  });
});
