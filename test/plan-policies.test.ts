/** R34–R36: plan policies in CEL, decided once with the plan, bounded and fail-closed. */
import { PoliciesService } from '../src/policies/policies.service.js';
import { startApp, type TestApp } from './support/app.js';
import { codeOf, freshKey, ok, World } from './support/world.js';
import { metric } from './support/metrics.js';

let app: TestApp;
let world: World;
let agent: string;
let platform: string;
let security: string;
let security2: string;
let reviewer: string;
let envs = 0;

interface Policy {
  name: string;
  expression: string;
  effect: 'DENY' | 'WARN' | 'REQUIRE_APPROVAL';
  message: string;
  group?: string | null;
  count?: number | null;
}

const PLAN = `id status policyResults { policy effect matched message error }
  pendingApprovalRules { group count } approvals { approver }`;

interface PolicyPlan {
  id: string;
  status: string;
  policyResults: {
    policy: string;
    effect: string;
    matched: boolean;
    message: string | null;
    error: string | null;
  }[];
  pendingApprovalRules: { group: string | null; count: number }[];
  approvals: { approver: string }[];
}

async function issue(name: string, role: string, groups: string[]): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    world.admin,
    `mutation($name: String!, $role: Role!, $groups: [String!]) {
       issueToken(name: $name, role: $role, groups: $groups) { token } }`,
    { name, role, groups },
  );
  return ok(result).issueToken.token;
}

/** Budgets well above what these expressions take, so that a loaded machine never fails one (the runaway aside). */
const BUDGETS = { PLANFENCE_POLICY_BUDGET_MS: '1000', PLANFENCE_PLAN_POLICY_BUDGET_MS: '3000' };

beforeAll(async () => {
  app = await startApp(BUDGETS);
  world = new World(app);
  agent = await issue('agent', 'AGENT', ['ci']);
  platform = await issue('plat', 'REVIEWER', ['platform']);
  security = await issue('sec', 'REVIEWER', ['security']);
  security2 = await issue('sec2', 'REVIEWER', ['security']);
  reviewer = await issue('rev', 'REVIEWER', []);
});
afterAll(() => app.close());

function setPolicies(env: string, planPolicies: Policy[], token = world.admin) {
  return world.gql<{
    updateEnvironmentPolicy: { policyVersion: number; planPolicies: Policy[] };
  }>(
    token,
    `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) {
       policyVersion planPolicies { name expression effect message group count } } }`,
    { input: { environment: env, planPolicies } },
  );
}

/** A new environment with these policies and the agent's lease on it. */
async function environment(
  planPolicies: Policy[],
  input: Record<string, unknown> = {},
): Promise<{ env: string; generation: number }> {
  const env = `pp-${++envs}`;
  ok(
    await world.gql(
      world.admin,
      'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
      { input: { name: env, ...input } },
    ),
  );
  if (planPolicies.length) ok(await setPolicies(env, planPolicies));
  return { env, generation: await world.acquire(agent, env, 3600) };
}

function submit(env: string, generation: number, content: string, title?: string) {
  return world.gql<{ submitPlan: PolicyPlan }>(
    agent,
    `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${PLAN} } }`,
    { input: { environment: env, generation, content, title, idempotencyKey: freshKey() } },
  );
}

function approve(token: string, planId: string, breakGlassReason?: string) {
  return world.gql<{ approvePlan: PolicyPlan }>(
    token,
    `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN} } }`,
    { input: { planId, breakGlassReason } },
  );
}

const DENY_BIG: Policy = {
  name: 'no-big-plans',
  expression: 'plan.contentBytes > 100',
  effect: 'DENY',
  message: 'plans over 100 bytes are refused here',
};
const WARN_HOTFIX: Policy = {
  name: 'hotfix-title',
  expression: 'plan.title.lowerAscii().contains("hotfix")',
  effect: 'WARN',
  message: 'a hotfix: read it twice',
};
const SECURITY_TWO: Policy = {
  name: 'security-review',
  expression: 'plan.title.startsWith("iam")',
  effect: 'REQUIRE_APPROVAL',
  message: 'IAM changes need two security reviewers',
  group: 'security',
  count: 2,
};

describe('saving policies', () => {
  // proves: R34
  test('an ADMIN saves them in order; each change is audited and bumps the policy version', async () => {
    const { env } = await environment([]);
    const first = ok(await setPolicies(env, [DENY_BIG, WARN_HOTFIX])).updateEnvironmentPolicy;
    expect(first.planPolicies).toEqual([
      { ...DENY_BIG, group: null, count: null },
      { ...WARN_HOTFIX, group: null, count: null },
    ]);
    const second = ok(await setPolicies(env, [SECURITY_TWO])).updateEnvironmentPolicy;
    expect(second.policyVersion).toBe(first.policyVersion + 1);
    expect(second.planPolicies.map((p) => p.name)).toEqual(['security-review']);
    const cleared = ok(await setPolicies(env, [])).updateEnvironmentPolicy;
    expect(cleared).toEqual({ policyVersion: second.policyVersion + 1, planPolicies: [] });
    const audit = (await world.auditEvents(env)).filter((e) => e.action === 'UPDATE_POLICY');
    expect(audit).toHaveLength(3);
    expect(audit.map((e) => e.outcome)).toEqual(['ACCEPTED', 'ACCEPTED', 'ACCEPTED']);
  });

  test('an environment without policies decides as before: no results, nothing in the audit detail', async () => {
    const { env, generation } = await environment([]);
    const plan = ok(await submit(env, generation, 'a plan')).submitPlan;
    expect(plan.policyResults).toEqual([]);
    const [accepted] = await world.auditEvents(env);
    expect(accepted).toMatchObject({ action: 'SUBMIT_PLAN', outcome: 'ACCEPTED', detail: null });
  });

  test('only an ADMIN may change them', async () => {
    const { env } = await environment([]);
    expect(codeOf(await setPolicies(env, [DENY_BIG], reviewer))).toBe('FORBIDDEN');
  });

  test.each<[string, Policy[], string | null, RegExp]>([
    [
      'a syntax error, with its position',
      [{ ...DENY_BIG, expression: 'plan.title ==' }],
      'no-big-plans',
      /^line 1, column \d+: /,
    ],
    [
      'an undeclared variable',
      [{ ...DENY_BIG, expression: 'plann.title == "x"' }],
      'no-big-plans',
      /line 1, column 1: undeclared reference to 'plann'/,
    ],
    [
      'an unknown field',
      [{ ...DENY_BIG, expression: 'summary.destroyed > 0' }],
      'no-big-plans',
      /summary has no field 'destroyed'/,
    ],
    [
      'operands of the wrong type',
      [{ ...DENY_BIG, expression: 'plan.contentBytes > "large"' }],
      'no-big-plans',
      /no matching overload for '_>_' applied to '\(int, string\)'/,
    ],
    [
      'a result that is not a bool',
      [{ ...DENY_BIG, expression: 'plan.title' }],
      'no-big-plans',
      /must evaluate to a bool, not string/,
    ],
    [
      'an unknown function',
      [{ ...DENY_BIG, expression: 'explode(plan.title)' }],
      'no-big-plans',
      /undeclared reference to 'explode'/,
    ],
    [
      'an expression over 4 KiB',
      [{ ...DENY_BIG, expression: `plan.title == "${'x'.repeat(4090)}"` }],
      'no-big-plans',
      /expression must be 1 to 4096 bytes/,
    ],
    [
      'a name unlike an environment name',
      [{ ...DENY_BIG, name: 'No Spaces' }],
      'No Spaces',
      /name must match/,
    ],
    [
      'two policies of one name',
      [DENY_BIG, { ...WARN_HOTFIX, name: DENY_BIG.name }],
      'no-big-plans',
      /used by two policies/,
    ],
    [
      'a count beyond 10',
      [{ ...SECURITY_TWO, count: 11 }],
      'security-review',
      /count must be 1 to 10/,
    ],
    [
      'a group on a DENY policy',
      [{ ...DENY_BIG, group: 'security' }],
      'no-big-plans',
      /REQUIRE_APPROVAL policies only/,
    ],
    [
      'more than 20 policies',
      Array.from({ length: 21 }, (_, i) => ({ ...DENY_BIG, name: `p${i}` })),
      null,
      /0 to 20 policies/,
    ],
  ])(
    '%s is refused when saved: BAD_USER_INPUT {policy, error}, nothing changes',
    async (_, policies, policy, error) => {
      const { env } = await environment([WARN_HOTFIX]);
      const result = await setPolicies(env, policies);
      expect(codeOf(result)).toBe('BAD_USER_INPUT');
      expect(result.errors![0].extensions).toEqual({
        code: 'BAD_USER_INPUT',
        policy,
        error: expect.stringMatching(error),
      });
      const after = ok(
        await world.gql<{ environment: { policyVersion: number; planPolicies: Policy[] } }>(
          world.admin,
          'query($n: String!) { environment(name: $n) { policyVersion planPolicies { name } } }',
          { n: env },
        ),
      ).environment;
      expect(after).toEqual({ policyVersion: 1, planPolicies: [{ name: WARN_HOTFIX.name }] });
      const last = (await world.auditEvents(env)).find((e) => e.action === 'UPDATE_POLICY')!;
      expect({ outcome: last.outcome, code: last.code }).toEqual({
        outcome: 'REJECTED',
        code: 'BAD_USER_INPUT',
      });
    },
  );
});

describe('each effect', () => {
  // proves: R35
  test('DENY refuses the submit: POLICY_DENIED {policy, message}, nothing stored, the fence unmoved, the rejection audited', async () => {
    const { env, generation } = await environment([DENY_BIG]);
    const before = await world.environment(env);
    const denied = await submit(env, generation, 'x'.repeat(101));
    expect(codeOf(denied)).toBe('POLICY_DENIED');
    expect(denied.errors![0].extensions).toEqual({
      code: 'POLICY_DENIED',
      policy: 'no-big-plans',
      message: 'plans over 100 bytes are refused here',
    });
    expect(await world.plans(env)).toEqual([]);
    expect((await world.environment(env)).fence).toBe(before.fence);
    const [last] = await world.auditEvents(env);
    expect(last).toMatchObject({
      action: 'SUBMIT_PLAN',
      outcome: 'REJECTED',
      code: 'POLICY_DENIED',
    });

    const small = ok(await submit(env, generation, 'x'.repeat(100))).submitPlan;
    expect(small.policyResults).toEqual([
      { policy: 'no-big-plans', effect: 'DENY', matched: false, message: null, error: null },
    ]);
    const [accepted] = await world.auditEvents(env);
    expect(accepted).toMatchObject({ action: 'SUBMIT_PLAN', outcome: 'ACCEPTED' });
    expect((accepted as { detail?: string }).detail).toBe('policy version 1');
  });

  // proves: R35
  test('WARN is stored with the plan and shown with it', async () => {
    const { env, generation } = await environment([WARN_HOTFIX]);
    const plan = ok(await submit(env, generation, 'restart web', 'HOTFIX: restart web')).submitPlan;
    const expected = [
      {
        policy: 'hotfix-title',
        effect: 'WARN',
        matched: true,
        message: 'a hotfix: read it twice',
        error: null,
      },
    ];
    expect(plan.policyResults).toEqual(expected);
    const read = ok(
      await world.gql<{ plan: PolicyPlan; plans: PolicyPlan[] }>(
        reviewer,
        `query($id: ID!, $env: String!) { plan(id: $id) { ${PLAN} } plans(environment: $env) { ${PLAN} } }`,
        { id: plan.id, env },
      ),
    );
    expect(read.plan.policyResults).toEqual(expected);
    expect(read.plans[0].policyResults).toEqual(expected);
    // Changing the policies later does not change what this plan was decided under.
    ok(await setPolicies(env, []));
    expect((await world.plan(plan.id))!.status).toBe('PROPOSED');
    const again = ok(
      await world.gql<{ plan: PolicyPlan }>(
        reviewer,
        `query($id: ID!) { plan(id: $id) { ${PLAN} } }`,
        {
          id: plan.id,
        },
      ),
    );
    expect(again.plan.policyResults).toEqual(expected);
  });

  // proves: R35
  test('REQUIRE_APPROVAL adds its rule to the plan: pending, then counted by the quorum like an environment rule', async () => {
    const { env, generation } = await environment([SECURITY_TWO]);
    const other = ok(await submit(env, generation, 'plain change', 'scale web')).submitPlan;
    expect(other.pendingApprovalRules).toEqual([{ group: null, count: 1 }]);

    const plan = ok(await submit(env, generation, 'grant role', 'iam: grant deployer')).submitPlan;
    expect(plan.pendingApprovalRules).toEqual([
      { group: null, count: 1 },
      { group: 'security', count: 2 },
    ]);
    // The environment's rule alone would publish it now: the plan's rule holds it back.
    const first = ok(await approve(platform, plan.id)).approvePlan;
    expect(first.status).toBe('PROPOSED');
    expect(first.pendingApprovalRules).toEqual([{ group: 'security', count: 2 }]);
    const second = ok(await approve(security, plan.id)).approvePlan;
    expect(second.status).toBe('PROPOSED');
    expect(second.pendingApprovalRules).toEqual([{ group: 'security', count: 1 }]);
    const queue = ok(
      await world.gql<{ reviewQueue: { id: string }[] }>(security2, '{ reviewQueue { id } }'),
    ).reviewQueue;
    expect(queue.map((p) => p.id)).toContain(plan.id);
    const third = ok(await approve(security2, plan.id)).approvePlan;
    expect(third.status).toBe('PUBLISHED');
    expect(third.pendingApprovalRules).toEqual([]);
  });

  test('REQUIRE_APPROVAL holds back a plan that its environment would publish at once', async () => {
    const { env, generation } = await environment([{ ...SECURITY_TWO, count: 1 }], {
      requireApproval: false,
    });
    expect(ok(await submit(env, generation, 'a', 'scale web')).submitPlan.status).toBe('PUBLISHED');
    const held = ok(await submit(env, generation, 'b', 'iam: rotate keys')).submitPlan;
    expect(held.status).toBe('PROPOSED');
    // Once held, it needs the environment's rules too, like any plan that is approved.
    expect(held.pendingApprovalRules).toEqual([
      { group: null, count: 1 },
      { group: 'security', count: 1 },
    ]);
    expect(ok(await approve(security, held.id)).approvePlan.status).toBe('PUBLISHED');
  });
});

test('several policies at once: results in order, the largest count per group wins, the first denial names itself', async () => {
  const policies: Policy[] = [
    { ...WARN_HOTFIX },
    { ...SECURITY_TWO },
    { ...SECURITY_TWO, name: 'iam-one', count: 1 },
    {
      name: 'any-two',
      expression: '"ci" in plan.submitterGroups',
      effect: 'REQUIRE_APPROVAL',
      message: 'CI plans need two reviewers',
      count: 2,
    },
    { ...DENY_BIG },
    {
      name: 'no-friday',
      expression: 'plan.title.endsWith("friday")',
      effect: 'DENY',
      message: 'not on a friday',
    },
  ];
  const { env, generation } = await environment(policies);
  const plan = ok(await submit(env, generation, 'small', 'iam hotfix')).submitPlan;
  expect(plan.policyResults.map((r) => [r.policy, r.matched])).toEqual([
    ['hotfix-title', true],
    ['security-review', true],
    ['iam-one', true],
    ['any-two', true],
    ['no-big-plans', false],
    ['no-friday', false],
  ]);
  expect(plan.pendingApprovalRules).toEqual([
    { group: null, count: 2 },
    { group: 'security', count: 2 },
  ]);
  const [accepted] = (await world.auditEvents(env)).filter((e) => e.action === 'SUBMIT_PLAN');
  expect((accepted as { detail?: string }).detail).toBe(
    'policy version 1; warned by hotfix-title; requires security:2, (any):2',
  );
  const denied = await submit(env, generation, 'x'.repeat(200), 'iam on friday');
  expect(denied.errors![0].extensions).toMatchObject({
    code: 'POLICY_DENIED',
    policy: 'no-big-plans',
  });
});

describe('a policy change between evaluation and commit', () => {
  /** Runs `change` once, right after the next evaluation of policies and before its decision. */
  function changeAfterNextEvaluation(change: () => Promise<void>): { evaluations: number[] } {
    const service = app.get(PoliciesService);
    const original = service.decide.bind(service);
    const seen = { evaluations: [] as number[] };
    service.decide = async (facts) => {
      const decision = await original(facts);
      seen.evaluations.push(decision.version);
      if (seen.evaluations.length === 1) await change();
      else service.decide = original;
      return decision;
    };
    return seen;
  }

  // proves: R34
  test('a submit allowed by the old policies but denied by the new ones is denied', async () => {
    const { env, generation } = await environment([WARN_HOTFIX]);
    const seen = changeAfterNextEvaluation(async () => {
      ok(await setPolicies(env, [DENY_BIG]));
    });
    const result = await submit(env, generation, 'y'.repeat(500));
    expect(seen.evaluations).toEqual([1, 2]);
    expect(result.errors![0].extensions).toMatchObject({
      code: 'POLICY_DENIED',
      policy: 'no-big-plans',
    });
    expect(await world.plans(env)).toEqual([]);
  });

  // proves: R34
  test('a submit denied by the old policies but allowed by the new ones is stored, with the new results', async () => {
    const { env, generation } = await environment([DENY_BIG]);
    const seen = changeAfterNextEvaluation(async () => {
      ok(await setPolicies(env, [WARN_HOTFIX]));
    });
    const plan = ok(await submit(env, generation, 'y'.repeat(500), 'hotfix')).submitPlan;
    expect(seen.evaluations).toEqual([1, 2]);
    expect(plan.policyResults.map((r) => r.policy)).toEqual(['hotfix-title']);
    // The evaluation under the old version left no rejection behind.
    const submits = (await world.auditEvents(env)).filter((e) => e.action === 'SUBMIT_PLAN');
    expect(submits.map((e) => e.outcome)).toEqual(['ACCEPTED']);
  });
});

describe('fail closed', () => {
  test('an expression that fails when it runs denies the submit, says why, and is counted', async () => {
    const { env, generation } = await environment([
      {
        name: 'ticket-number',
        expression: 'int(plan.title) > 1000',
        effect: 'WARN',
        message: 'an old ticket',
      },
    ]);
    const before = await metric(app.url, 'planfence_policy_evaluations_total{outcome="error"}');
    const result = await submit(env, generation, 'a plan', 'not a number');
    expect(result.errors![0].extensions).toEqual({
      code: 'POLICY_DENIED',
      policy: 'ticket-number',
      message: expect.stringMatching(/^evaluation failed: /),
    });
    expect(await world.plans(env)).toEqual([]);
    expect(await metric(app.url, 'planfence_policy_evaluations_total{outcome="error"}')).toBe(
      before + 1,
    );
    // The same policy decides a plan it can evaluate.
    expect(
      ok(await submit(env, generation, 'a plan', '1234')).submitPlan.policyResults[0],
    ).toMatchObject({
      matched: true,
      error: null,
    });
  });

  const digits = '[0,1,2,3,4,5,6,7,8,9]';
  /** 10^depth iterations: far past any budget for depth 8 and more. */
  const runaway = (depth: number) => {
    const vars = 'abcdefghijklmnop'.slice(0, depth).split('');
    return vars.reduceRight(
      (inner, v) => `${digits}.all(${v}, ${inner})`,
      `${vars.join(' + ')} >= 0`,
    );
  };

  // proves: R35
  test('an expression that runs past its budget denies, is counted, and the next plan is evaluated by a fresh worker', async () => {
    const { env, generation } = await environment([
      { name: 'runaway', expression: runaway(8), effect: 'WARN', message: 'never decided' },
    ]);
    const before = await metric(app.url, 'planfence_policy_evaluations_total{outcome="budget"}');
    const result = await submit(env, generation, 'a plan');
    expect(result.errors![0].extensions).toEqual({
      code: 'POLICY_DENIED',
      policy: 'runaway',
      message: 'evaluation failed: evaluation ran past its budget of 1000 ms',
    });
    expect(await metric(app.url, 'planfence_policy_evaluations_total{outcome="budget"}')).toBe(
      before + 1,
    );
    ok(await setPolicies(env, [WARN_HOTFIX]));
    expect(ok(await submit(env, generation, 'next')).submitPlan.policyResults).toHaveLength(1);
    // In a dry run: the policy that ran out, and the one after it, never evaluated.
    const tried = ok(
      await world.gql<{ dryRunPlanPolicies: PolicyPlan['policyResults'] }>(
        reviewer,
        `query($env: String!, $p: [PlanPolicyInput!]) {
           dryRunPlanPolicies(environment: $env, planPolicies: $p, content: "x") { policy matched error } }`,
        {
          env,
          p: [
            { name: 'runaway', expression: runaway(8), effect: 'WARN', message: 'never decided' },
            WARN_HOTFIX,
          ],
        },
      ),
    ).dryRunPlanPolicies;
    expect(tried).toEqual([
      { policy: 'runaway', matched: true, error: 'evaluation ran past its budget of 1000 ms' },
      {
        policy: 'hotfix-title',
        matched: true,
        error: 'not evaluated: evaluation ran past its budget of 1000 ms',
      },
    ]);
  });

  test('while a runaway evaluation runs, the service keeps answering /health', async () => {
    const slow = await startApp({
      PLANFENCE_POLICY_BUDGET_MS: '3000',
      PLANFENCE_PLAN_POLICY_BUDGET_MS: '3000',
    });
    try {
      const w = new World(slow);
      const token = ok(
        await w.gql<{ issueToken: { token: string } }>(
          w.admin,
          'mutation { issueToken(name: "a", role: AGENT) { token } }',
        ),
      ).issueToken.token;
      await w.createEnvironment('slow', 'MONOTONIC');
      ok(
        await w.gql(
          w.admin,
          'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
          {
            input: {
              environment: 'slow',
              planPolicies: [
                { name: 'runaway', expression: runaway(10), effect: 'DENY', message: 'x' },
              ],
            },
          },
        ),
      );
      const generation = await w.acquire(token, 'slow');
      let settled = false;
      const pending = w.submit(token, 'slow', generation, 'a plan').finally(() => {
        settled = true;
      });
      const health = await fetch(`${slow.url}/health`);
      expect(health.status).toBe(200);
      // Answered while the evaluation (10^10 steps, stopped only by its 3 s budget) still ran.
      expect(settled).toBe(false);
      const result = await pending;
      expect(result.errors![0].extensions).toMatchObject({
        code: 'POLICY_DENIED',
        message: expect.stringMatching(/budget of 3000 ms/),
      });
    } finally {
      await slow.close();
    }
  });
});

describe('break-glass', () => {
  // proves: R36
  test('skips the approvals a policy requires and the freeze', async () => {
    const { env, generation } = await environment([SECURITY_TWO]);
    const plan = ok(await submit(env, generation, 'grant', 'iam: grant admin')).submitPlan;
    ok(
      await world.gql(
        world.admin,
        'mutation($e: String!) { freezeEnvironment(environment: $e, reason: "incident") { name } }',
        { e: env },
      ),
    );
    expect(codeOf(await approve(platform, plan.id))).toBe('OK');
    const glass = ok(await approve(world.admin, plan.id, 'incident 42')).approvePlan;
    expect(glass.status).toBe('PUBLISHED');
  });

  // proves: R36
  test('never a DENY: a denied plan does not exist, so there is nothing to break glass for', async () => {
    const { env, generation } = await environment([DENY_BIG]);
    const denied = await submit(env, generation, 'z'.repeat(300));
    expect(codeOf(denied)).toBe('POLICY_DENIED');
    expect(await world.plans(env)).toEqual([]);
    expect(codeOf(await approve(world.admin, `${env}@${generation}.1`, 'incident 43'))).toBe(
      'NOT_FOUND',
    );
  });
});

describe('dryRunPlanPolicies', () => {
  const query = `query($env: String!, $policies: [PlanPolicyInput!], $content: String!, $type: PlanContentType!) {
    dryRunPlanPolicies(environment: $env, planPolicies: $policies, content: $content, contentType: $type) {
      policy effect matched message error } }`;

  test('evaluates the environment’s policies, or the given ones, storing nothing', async () => {
    const { env } = await environment([DENY_BIG, WARN_HOTFIX]);
    const own = ok(
      await world.gql<{ dryRunPlanPolicies: PolicyPlan['policyResults'] }>(reviewer, query, {
        env,
        content: 'x'.repeat(101),
        type: 'TEXT',
      }),
    ).dryRunPlanPolicies;
    expect(own.map((r) => [r.policy, r.matched])).toEqual([
      ['no-big-plans', true],
      ['hotfix-title', false],
    ]);
    const destroy: Policy = {
      name: 'no-destroy',
      expression:
        'summary.destroy > 0 || terraform.resource_changes.exists(r, "delete" in r.change.actions)',
      effect: 'DENY',
      message: 'nothing is destroyed here',
    };
    const document = JSON.stringify({
      format_version: '1.2',
      terraform_version: '1.9.0',
      resource_changes: [
        { address: 'aws_s3_bucket.logs', type: 'aws_s3_bucket', change: { actions: ['delete'] } },
      ],
    });
    const tried = ok(
      await world.gql<{ dryRunPlanPolicies: PolicyPlan['policyResults'] }>(reviewer, query, {
        env,
        policies: [destroy],
        content: document,
        type: 'TERRAFORM_PLAN_JSON',
      }),
    ).dryRunPlanPolicies;
    expect(tried).toEqual([
      {
        policy: 'no-destroy',
        effect: 'DENY',
        matched: true,
        message: 'nothing is destroyed here',
        error: null,
      },
    ]);
    expect(await world.plans(env)).toEqual([]);
    // A policy that fails shows as matched, with why; a dry run reports it and refuses nothing.
    const failing = ok(
      await world.gql<{ dryRunPlanPolicies: PolicyPlan['policyResults'] }>(reviewer, query, {
        env,
        policies: [{ ...WARN_HOTFIX, expression: '1 / size(plan.title) == 1' }],
        content: 'x',
        type: 'TEXT',
      }),
    ).dryRunPlanPolicies;
    expect(failing).toEqual([
      {
        policy: 'hotfix-title',
        effect: 'WARN',
        matched: true,
        message: 'a hotfix: read it twice',
        error: expect.any(String),
      },
    ]);
    const invalid = await world.gql(reviewer, query, {
      env,
      policies: [{ ...destroy, expression: 'summary.destroy >' }],
      content: document,
      type: 'TERRAFORM_PLAN_JSON',
    });
    expect(invalid.errors![0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      policy: 'no-destroy',
    });
    expect(codeOf(await world.gql(agent, query, { env, content: 'x', type: 'TEXT' }))).toBe(
      'FORBIDDEN',
    );
  });
});
