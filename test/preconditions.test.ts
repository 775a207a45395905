/**
 * DESIGN §22, R50–R53: preconditions beyond approval, end to end over HTTP on the real
 * database (both dialects): required checks reported by a CHECKER, promotion from another
 * environment after a soak, the window in which a published plan must start deploying, and
 * drift that moves the deployment sequence.
 */
import { Database } from '../src/database/database.js';
import { raiseAfterRestore } from '../src/fencing/restore.js';
import { RetentionService } from '../src/retention/retention.service.js';
import { startApp, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { connectMcp } from './support/mcp.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

let app: TestApp;
let world: World;
let d: Deployments;
const tokens: Record<string, string> = {};

const PLAN = `id status approvals { approver } pendingChecks publishedAt reviewedBy sourceRevision
  checks { name status summary detailsUrl reportedBy at }`;

interface CheckedPlan {
  id: string;
  status: string;
  approvals: { approver: string }[];
  pendingChecks: string[];
  publishedAt: string | null;
  reviewedBy: string | null;
  sourceRevision: string | null;
  checks: {
    name: string;
    status: string;
    summary: string | null;
    detailsUrl: string | null;
    reportedBy: string;
  }[];
}

async function issue(name: string, role: string): Promise<string> {
  const result = await world.gql<{ issueToken: { token: string } }>(
    world.admin,
    'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
    { name, role },
  );
  return ok(result).issueToken.token;
}

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  d = new Deployments(world);
  tokens.agent = await issue('agent', 'AGENT');
  tokens.reviewer = await issue('reviewer', 'REVIEWER');
  tokens.reviewer2 = await issue('reviewer2', 'REVIEWER');
  tokens.deployer = await issue('deployer', 'DEPLOYER');
  tokens.checker = await issue('scanner', 'CHECKER');
  tokens.checker2 = await issue('tests', 'CHECKER');
});
afterAll(() => app.close());

/** An environment's preconditions as the API shows them. */
interface Settings {
  requiredChecks: string[];
  promotion: { from: string; soakMinutes: number } | null;
  deployWithinMinutes: number | null;
}
const SETTINGS = 'requiredChecks promotion { from soakMinutes } deployWithinMinutes';

function configure(environment: string, settings: Record<string, unknown>) {
  return world.gql<{ updateEnvironmentPolicy: Settings }>(
    world.admin,
    `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) {
       ${SETTINGS} } }`,
    { input: { environment, ...settings } },
  );
}

async function environmentWith(
  name: string,
  settings: Record<string, unknown>,
  requireApproval = true,
): Promise<void> {
  await world.createEnvironment(name, 'MONOTONIC', requireApproval);
  ok(await configure(name, settings));
}

function submit(environment: string, generation: number, extra: Record<string, unknown> = {}) {
  return world.gql<{ submitPlan: CheckedPlan }>(
    tokens.agent,
    `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${PLAN} } }`,
    {
      input: {
        environment,
        generation,
        content: `plan ${freshKey()}`,
        idempotencyKey: freshKey(),
        ...extra,
      },
    },
  );
}

async function proposal(environment: string, extra: Record<string, unknown> = {}) {
  const generation = await world.acquire(tokens.agent, environment, 600);
  return ok(await submit(environment, generation, extra)).submitPlan;
}

function report(
  token: string,
  planId: string,
  name: string,
  status: string,
  extra: Record<string, unknown> = {},
) {
  return world.gql<{ reportCheck: CheckedPlan }>(
    token,
    `mutation($input: ReportCheckInput!) { reportCheck(input: $input) { ${PLAN} } }`,
    { input: { planId, name, status, ...extra } },
  );
}

function approve(token: string, planId: string, extra: Record<string, unknown> = {}) {
  return world.gql<{ approvePlan: CheckedPlan }>(
    token,
    `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN} } }`,
    { input: { planId, ...extra } },
  );
}

async function plan(id: string): Promise<CheckedPlan> {
  return ok(
    await world.gql<{ plan: CheckedPlan }>(
      world.admin,
      `query($id: ID!) { plan(id: $id) { ${PLAN} } }`,
      {
        id,
      },
    ),
  ).plan;
}

function drift(token: string, environment: string, detail: string) {
  return world.gql<{
    reportDrift: { deploymentSequence: number; driftReportedAt: string | null };
  }>(
    token,
    `mutation($environment: String!, $detail: String!) { reportDrift(environment: $environment, detail: $detail) {
       deploymentSequence driftReportedAt } }`,
    { environment, detail },
  );
}

/** Publishes a plan of `revision` in `environment` (no approval needed) and deploys it to `outcome`. */
async function deployRevision(
  environment: string,
  revision: string | null,
  outcome: 'SUCCEEDED' | 'FAILED',
) {
  const generation = await world.acquire(tokens.agent, environment, 600);
  const published = ok(
    await submit(environment, generation, { sourceRevision: revision }),
  ).submitPlan;
  await world.release(tokens.agent, environment, generation);
  expect(published.status).toBe('PUBLISHED');
  const started = await d.startOk(tokens.deployer, environment, published.id);
  const finished = ok(await d.finish(tokens.deployer, started.id, outcome)).finishDeployment;
  return { published, finished };
}

describe('R50: required checks', () => {
  // proves: R50
  test("an AI agent's submit_plan says which required checks publication waits for", async () => {
    await environmentWith('checked-mcp', { requiredChecks: ['scan'] });
    const generation = await world.acquire(tokens.agent, 'checked-mcp', 600);
    const agent = await connectMcp(app.url, tokens.agent, 'http');
    try {
      const result = await agent.call('submit_plan', {
        environment: 'checked-mcp',
        generation,
        content: 'scale web to 3',
      });
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({
        plan: { status: 'PROPOSED', pendingChecks: ['scan'] },
      });
      const text = (result.content as { type: string; text: string }[])
        .map((c) => c.text)
        .join('\n');
      expect(text).toContain('required checks scan');
    } finally {
      await agent.close();
    }
  });

  // proves: R50
  test('approvals are recorded while checks are pending; a FAILURE holds; the SUCCESS that completes them publishes; a decided plan refuses reports', async () => {
    await environmentWith('checked', { requiredChecks: ['scan', 'unit'] });
    const p = await proposal('checked');
    expect(p.pendingChecks).toEqual(['scan', 'unit']);

    const approved = ok(await approve(tokens.reviewer, p.id)).approvePlan;
    expect(approved).toMatchObject({ status: 'PROPOSED', pendingChecks: ['scan', 'unit'] });
    expect(approved.approvals.map((a) => a.approver)).toEqual(['reviewer']);

    const scanned = ok(
      await report(tokens.checker, p.id, 'scan', 'SUCCESS', {
        summary: '0 findings',
        detailsUrl: 'https://ci.example/run/1',
      }),
    ).reportCheck;
    expect(scanned).toMatchObject({ status: 'PROPOSED', pendingChecks: ['unit'] });
    expect(scanned.checks).toEqual([
      expect.objectContaining({
        name: 'scan',
        status: 'SUCCESS',
        summary: '0 findings',
        detailsUrl: 'https://ci.example/run/1',
        reportedBy: 'scanner',
      }),
    ]);

    const failed = ok(await report(tokens.checker2, p.id, 'unit', 'FAILURE')).reportCheck;
    expect(failed).toMatchObject({ status: 'PROPOSED', pendingChecks: ['unit'] });
    // A second approval changes nothing while a check fails.
    const held = ok(await approve(tokens.reviewer2, p.id)).approvePlan;
    expect(held.status).toBe('PROPOSED');

    const passed = ok(await report(tokens.checker2, p.id, 'unit', 'SUCCESS')).reportCheck;
    expect(passed).toMatchObject({ status: 'PUBLISHED', pendingChecks: [] });
    expect(passed.checks.map((c) => [c.name, c.status])).toEqual([
      ['scan', 'SUCCESS'],
      ['unit', 'SUCCESS'],
    ]);
    expect((await world.environment('checked')).currentPlan?.id).toBe(p.id);

    const late = await report(tokens.checker, p.id, 'scan', 'FAILURE');
    expect(codeOf(late)).toBe('INVALID_PLAN_STATE');
    expect(late.errors![0].extensions).toMatchObject({ status: 'PUBLISHED' });
    expect((await plan(p.id)).checks.find((c) => c.name === 'scan')?.status).toBe('SUCCESS');

    const audit = await world.auditEvents('checked');
    expect(audit.filter((e) => e.action === 'REPORT_CHECK').map((e) => e.outcome)).toEqual([
      'REJECTED',
      'ACCEPTED',
      'ACCEPTED',
      'ACCEPTED',
    ]);
  });

  // proves: R50
  test('checks first: the approval that completes the rules publishes; a rejected plan refuses reports', async () => {
    await environmentWith('checked-first', { requiredChecks: ['scan'] });
    const p = await proposal('checked-first');
    ok(await report(tokens.checker, p.id, 'scan', 'SUCCESS'));
    expect(ok(await approve(tokens.reviewer, p.id)).approvePlan.status).toBe('PUBLISHED');

    const q = await proposal('checked-first');
    ok(await world.reject(tokens.reviewer, q.id, 'no'));
    const refused = await report(tokens.checker, q.id, 'scan', 'SUCCESS');
    expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
    expect(refused.errors![0].extensions).toMatchObject({ status: 'REJECTED' });
  });

  // proves: R50
  test('where no approval is needed the submit waits for the checks, and the SUCCESS publishes', async () => {
    await environmentWith('auto-checked', { requiredChecks: ['scan'] }, false);
    const p = await proposal('auto-checked');
    expect(p).toMatchObject({ status: 'PROPOSED', pendingChecks: ['scan'] });
    const published = ok(await report(tokens.checker, p.id, 'scan', 'SUCCESS')).reportCheck;
    expect(published.status).toBe('PUBLISHED');
  });

  // proves: R50
  test('break-glass skips the required checks and says so in the audit log', async () => {
    await environmentWith('glass-checked', { requiredChecks: ['scan'] });
    const p = await proposal('glass-checked');
    const published = ok(
      await approve(world.admin, p.id, { breakGlassReason: 'scanner down, outage' }),
    ).approvePlan;
    expect(published.status).toBe('PUBLISHED');
    const audit = await world.auditEvents('glass-checked');
    expect(audit).toContainEqual(
      expect.objectContaining({
        action: 'CHECKS_SKIPPED',
        planId: p.id,
        outcome: 'ACCEPTED',
        detail: 'published by break-glass (scanner down, outage) without the required checks scan',
      }),
    );

    // Nothing was pending: nothing is said to be skipped.
    const q = await proposal('glass-checked');
    ok(await report(tokens.checker, q.id, 'scan', 'SUCCESS'));
    ok(await approve(world.admin, q.id, { breakGlassReason: 'reviewers away' }));
    const after = await world.auditEvents('glass-checked');
    expect(after.filter((e) => e.action === 'CHECKS_SKIPPED').map((e) => e.planId)).toEqual([p.id]);
  });

  // proves: R50
  test('a check reported on a plan below the fence is refused, and nothing is recorded', async () => {
    await environmentWith('checked-stale', { requiredChecks: ['scan'] });
    const old = await proposal('checked-stale');
    // A newer lease's proposal raises the fence (MONOTONIC) and passes the old plan over.
    await proposal('checked-stale');
    const passed = await report(tokens.checker, old.id, 'scan', 'SUCCESS');
    expect(codeOf(passed)).toBe('INVALID_PLAN_STATE');
    expect(passed.errors![0].extensions).toMatchObject({ status: 'OBSOLETE' });

    // After a restore from a backup the fence rose past proposals still PROPOSED: the report
    // that would publish one (its approval is in) is refused.
    const kept = await proposal('checked-stale');
    ok(await approve(tokens.reviewer, kept.id));
    await app.app
      .get(Database)
      .write((m) => raiseAfterRestore(m, { margin: 10, actor: 'operator:test', now: Date.now() }));
    const stale = await report(tokens.checker, kept.id, 'scan', 'SUCCESS');
    expect(codeOf(stale)).toBe('STALE_GENERATION');
    expect(stale.errors![0].message).toBe(`plan ${kept.id}'s generation 3 is below the fence 13`);
    expect(stale.errors![0].extensions).toMatchObject({ generation: 3, fence: 13 });
    expect((await plan(kept.id)).checks).toEqual([]);
  });

  // proves: R50, R17
  test('while the environment is frozen a report that would publish is refused FROZEN; one that would not is recorded', async () => {
    await environmentWith('checked-frozen', { requiredChecks: ['scan'] });
    const p = await proposal('checked-frozen');
    ok(await approve(tokens.reviewer, p.id));
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "checked-frozen", reason: "incident 9") { name } }',
      ),
    );
    const failing = ok(await report(tokens.checker, p.id, 'scan', 'FAILURE')).reportCheck;
    expect(failing.checks.map((c) => c.status)).toEqual(['FAILURE']);
    const passing = await report(tokens.checker, p.id, 'scan', 'SUCCESS');
    expect(codeOf(passing)).toBe('FROZEN');
    expect(passing.errors![0].extensions).toMatchObject({ reason: 'incident 9' });
    expect((await plan(p.id)).checks.map((c) => c.status)).toEqual(['FAILURE']);
  });

  // proves: R50
  test('a check reported on a plan whose content the retention purged is refused', async () => {
    const own = await startApp({ PLANFENCE_PLAN_RETENTION_DAYS: '1' });
    const w = new World(own);
    try {
      await w.createEnvironment('purged', 'MONOTONIC', true);
      ok(
        await w.gql(
          w.admin,
          'mutation { updateEnvironmentPolicy(input: { environment: "purged", requiredChecks: ["scan"] }) { name } }',
        ),
      );
      const agent = await w.issue('agent', 'AGENT');
      const reviewer = await w.issue('reviewer', 'REVIEWER');
      const checker = await w.issue('scanner', 'CHECKER');
      const generation = await w.acquire(agent, 'purged', 600);
      const p = await w.submitOk(agent, 'purged', generation, 'old plan');
      ok(await w.approve(reviewer, p.id));
      w.advance(2 * 86400);
      await own.get(RetentionService).purge();
      const late = await w.gql(
        checker,
        'mutation($id: ID!) { reportCheck(input: { planId: $id, name: "scan", status: SUCCESS }) { id } }',
        { id: p.id },
      );
      expect(codeOf(late)).toBe('INVALID_PLAN_STATE');
      expect(late.errors![0].message).toBe(
        `plan ${p.id} waited past the retention period and its content was purged; submit it again`,
      );
      expect(late.errors![0].extensions).toMatchObject({ status: 'PROPOSED' });
    } finally {
      await own.close();
    }
  });

  // proves: R50
  test('only a CHECKER (or ADMIN) reports; a CHECKER reads but cannot approve or submit; bad input is refused', async () => {
    await environmentWith('checked-roles', { requiredChecks: ['scan'] });
    const p = await proposal('checked-roles');
    expect(codeOf(await report(tokens.agent, p.id, 'scan', 'SUCCESS'))).toBe('FORBIDDEN');
    expect(codeOf(await report(tokens.reviewer, p.id, 'scan', 'SUCCESS'))).toBe('FORBIDDEN');
    expect(codeOf(await approve(tokens.checker, p.id))).toBe('FORBIDDEN');
    expect(
      codeOf(await report(tokens.checker, p.id, 'scan', 'SUCCESS', { detailsUrl: 'javascript:x' })),
    ).toBe('BAD_USER_INPUT');
    expect(codeOf(await report(tokens.checker, p.id, 'Bad Name', 'SUCCESS'))).toBe(
      'BAD_USER_INPUT',
    );
    expect(
      ok(await world.gql(tokens.checker, '{ plans(environment: "checked-roles") { id } }')),
    ).toBeTruthy();
    expect(codeOf(await configure('checked-roles', { requiredChecks: ['a', 'a'] }))).toBe(
      'BAD_USER_INPUT',
    );
  });

  // proves: R50
  test('concurrent SUCCESS reports and approvals publish exactly once', async () => {
    await environmentWith('checked-race', { requiredChecks: ['scan', 'unit'] });
    for (let round = 0; round < 8; round++) {
      const p = await proposal('checked-race');
      const results = await Promise.all([
        report(tokens.checker, p.id, 'scan', 'SUCCESS'),
        report(tokens.checker2, p.id, 'unit', 'SUCCESS'),
        approve(tokens.reviewer, p.id),
      ]);
      for (const result of results) expect(result.errors).toBeUndefined();
      expect((await plan(p.id)).status).toBe('PUBLISHED');
      const audit = await world.auditEvents('checked-race');
      const publishing = audit.filter(
        (e) =>
          e.planId === p.id &&
          e.outcome === 'ACCEPTED' &&
          /(^|; )published$/.test((e as { detail?: string }).detail ?? ''),
      );
      expect(publishing).toHaveLength(1);
    }
  });
});

describe('R51: promotion', () => {
  // proves: R51
  test('production publishes a revision only after it succeeded in staging and soaked; refusals name from and sourceRevision; break-glass does not skip it', async () => {
    await world.createEnvironment('staging', 'MONOTONIC', false);
    await environmentWith('production', { promotion: { from: 'staging', soakMinutes: 60 } });

    const p = await proposal('production', { sourceRevision: 'rev-a' });
    const early = await approve(tokens.reviewer, p.id);
    expect(codeOf(early)).toBe('PRECONDITION_FAILED');
    expect(early.errors![0].extensions).toMatchObject({
      reason: 'PROMOTION',
      from: 'staging',
      sourceRevision: 'rev-a',
    });
    // Nothing recorded by the refused step.
    expect((await plan(p.id)).approvals).toEqual([]);

    await deployRevision('staging', 'rev-a', 'SUCCEEDED');
    const soaking = await approve(tokens.reviewer, p.id);
    expect(codeOf(soaking)).toBe('PRECONDITION_FAILED');
    expect(soaking.errors![0].message).toMatch(/soaks until/);
    const glass = await approve(world.admin, p.id, { breakGlassReason: 'hurry' });
    expect(codeOf(glass)).toBe('PRECONDITION_FAILED');
    expect(glass.errors![0].extensions).toMatchObject({ reason: 'PROMOTION' });

    world.advance(61 * 60);
    expect(ok(await approve(tokens.reviewer, p.id)).approvePlan.status).toBe('PUBLISHED');

    // A later FAILED deployment in staging is its latest finished one: nothing is promoted.
    await deployRevision('staging', 'rev-b', 'FAILED');
    world.advance(61 * 60);
    const q = await proposal('production', { sourceRevision: 'rev-b' });
    const failed = await approve(tokens.reviewer, q.id);
    expect(failed.errors![0].extensions).toMatchObject({
      reason: 'PROMOTION',
      sourceRevision: 'rev-b',
    });

    // No sourceRevision: never promoted.
    const r = await proposal('production');
    const bare = await approve(tokens.reviewer, r.id);
    expect(bare.errors![0].extensions).toMatchObject({ reason: 'PROMOTION', sourceRevision: null });
    expect(bare.errors![0].message).toMatch(/no sourceRevision/);
  });

  // proves: R51
  test('a submit that would publish is refused with nothing stored; a check report that would publish is refused too', async () => {
    await world.createEnvironment('stage2', 'MONOTONIC', false);
    await environmentWith('prod2', { promotion: { from: 'stage2', soakMinutes: 0 } }, false);
    const generation = await world.acquire(tokens.agent, 'prod2', 600);
    const refused = await submit('prod2', generation, { sourceRevision: 'r1' });
    expect(codeOf(refused)).toBe('PRECONDITION_FAILED');
    expect(refused.errors![0].extensions).toMatchObject({
      reason: 'PROMOTION',
      from: 'stage2',
      sourceRevision: 'r1',
    });
    expect(await world.plans('prod2')).toEqual([]);
    await deployRevision('stage2', 'r1', 'SUCCEEDED');
    expect(ok(await submit('prod2', generation, { sourceRevision: 'r1' })).submitPlan.status).toBe(
      'PUBLISHED',
    );

    await environmentWith('prod3', {
      promotion: { from: 'stage2', soakMinutes: 0 },
      requiredChecks: ['scan'],
    });
    const p = await proposal('prod3', { sourceRevision: 'other' });
    ok(await approve(tokens.reviewer, p.id));
    const completing = await report(tokens.checker, p.id, 'scan', 'SUCCESS');
    expect(codeOf(completing)).toBe('PRECONDITION_FAILED');
    expect(completing.errors![0].extensions).toMatchObject({ reason: 'PROMOTION' });
    expect((await plan(p.id)).checks).toEqual([]);
  });

  // proves: R51
  test('each promotion refusal says why; a plan publishes at the very minute its soak ends', async () => {
    await world.createEnvironment('stage-m', 'MONOTONIC', false);
    await environmentWith('prod-m', { promotion: { from: 'stage-m', soakMinutes: 60 } });
    const p = await proposal('prod-m', { sourceRevision: 'r1' });
    const refusal = async () => {
      const result = await approve(tokens.reviewer, p.id);
      expect(codeOf(result)).toBe('PRECONDITION_FAILED');
      expect(result.errors![0].extensions).toMatchObject({
        reason: 'PROMOTION',
        from: 'stage-m',
        sourceRevision: 'r1',
      });
      return result.errors![0].message;
    };
    const refused = `plan ${p.id} cannot be promoted from "stage-m"`;
    expect(await refusal()).toBe(`${refused}: nothing has finished deploying there yet`);

    await deployRevision('stage-m', null, 'SUCCEEDED');
    expect(await refusal()).toBe(
      `${refused}: its latest finished deployment stage-m#1 is of revision (none), not r1`,
    );
    await deployRevision('stage-m', 'r0', 'SUCCEEDED');
    expect(await refusal()).toBe(
      `${refused}: its latest finished deployment stage-m#2 is of revision r0, not r1`,
    );
    await deployRevision('stage-m', 'r1', 'FAILED');
    expect(await refusal()).toBe(`${refused}: its latest finished deployment stage-m#3 FAILED`);

    const { finished } = await deployRevision('stage-m', 'r1', 'SUCCEEDED');
    const soaked = Date.parse(finished.finishedAt!) + 60 * 60_000;
    world.advance(60 * 60 - 1);
    expect(await refusal()).toBe(
      `${refused}: deployment stage-m#4 of r1 soaks until ${new Date(soaked).toISOString()} (60 minutes)`,
    );
    world.advance(1);
    expect(ok(await approve(tokens.reviewer, p.id)).approvePlan).toMatchObject({
      status: 'PUBLISHED',
      publishedAt: new Date(soaked).toISOString(),
    });

    // A submit names itself "the plan"; without a revision it is never promoted.
    await environmentWith('prod-m2', { promotion: { from: 'stage-m', soakMinutes: 0 } }, false);
    const generation = await world.acquire(tokens.agent, 'prod-m2', 600);
    const bare = await submit('prod-m2', generation);
    expect(bare.errors![0].message).toBe(
      'the plan cannot be promoted from "stage-m": it has no sourceRevision (submit it with the revision it was made from)',
    );
    expect(bare.errors![0].extensions).toMatchObject({ reason: 'PROMOTION', sourceRevision: null });
  });

  // proves: R50, R51
  test('a change of the required checks or the promotion bumps the policy version submits are decided at; each setting changes alone', async () => {
    await world.createEnvironment('versioned-up', 'MONOTONIC', false);
    await world.createEnvironment('versioned', 'MONOTONIC', true);
    const read = async () =>
      ok(
        await world.gql<{ environment: Settings & { policyVersion: number } }>(
          world.admin,
          `query($name: String!) { environment(name: $name) { policyVersion ${SETTINGS} } }`,
          { name: 'versioned' },
        ),
      ).environment;
    const v0 = (await read()).policyVersion;
    ok(await configure('versioned', { requiredChecks: ['scan'] }));
    expect((await read()).policyVersion).toBe(v0 + 1);
    ok(await configure('versioned', { promotion: { from: 'versioned-up', soakMinutes: 7 } }));
    expect((await read()).policyVersion).toBe(v0 + 2);
    // The window is read when a deployment starts, not when a plan is submitted.
    ok(await configure('versioned', { deployWithinMinutes: 9 }));
    expect(await read()).toEqual({
      policyVersion: v0 + 2,
      requiredChecks: ['scan'],
      promotion: { from: 'versioned-up', soakMinutes: 7 },
      deployWithinMinutes: 9,
    });
    ok(await configure('versioned', { requiredChecks: ['scan', 'unit'] }));
    expect(await read()).toEqual({
      policyVersion: v0 + 3,
      requiredChecks: ['scan', 'unit'],
      promotion: { from: 'versioned-up', soakMinutes: 7 },
      deployWithinMinutes: 9,
    });
    ok(await configure('versioned', { clearPromotion: true }));
    expect(await read()).toMatchObject({
      policyVersion: v0 + 4,
      promotion: null,
      deployWithinMinutes: 9,
    });
  });

  test('settings: promotion set and cleared, from an unknown environment or from itself refused', async () => {
    await world.createEnvironment('settings', 'MONOTONIC', true);
    const set = ok(
      await configure('settings', {
        requiredChecks: ['a', 'b'],
        promotion: { from: 'staging', soakMinutes: 5 },
        deployWithinMinutes: 30,
      }),
    ).updateEnvironmentPolicy;
    expect(set).toEqual({
      requiredChecks: ['a', 'b'],
      promotion: { from: 'staging', soakMinutes: 5 },
      deployWithinMinutes: 30,
    });
    const cleared = ok(
      await configure('settings', {
        clearPromotion: true,
        deployWithinMinutes: 0,
        requiredChecks: [],
      }),
    ).updateEnvironmentPolicy;
    expect(cleared).toEqual({ requiredChecks: [], promotion: null, deployWithinMinutes: null });
    expect(codeOf(await configure('settings', { promotion: { from: 'nowhere' } }))).toBe(
      'NOT_FOUND',
    );
    expect(codeOf(await configure('settings', { promotion: { from: 'settings' } }))).toBe(
      'BAD_USER_INPUT',
    );
    expect(codeOf(await configure('settings', { deployWithinMinutes: 10081 }))).toBe(
      'BAD_USER_INPUT',
    );
  });
});

describe('R52: deploy window', () => {
  // proves: R52
  test('a plan published longer ago than deployWithinMinutes is not started: DEPLOY_WINDOW with deployBy', async () => {
    await environmentWith('windowed', { deployWithinMinutes: 30 }, false);
    const [first] = await d.publish('windowed', tokens.agent);
    world.advance(29 * 60);
    const started = await d.startOk(tokens.deployer, 'windowed', first);
    ok(await d.finish(tokens.deployer, started.id, 'SUCCEEDED'));

    const [second] = await d.publish('windowed', tokens.agent);
    const publishedAt = (await plan(second)).publishedAt!;
    world.advance(31 * 60);
    const late = await d.start(tokens.deployer, 'windowed', second);
    expect(codeOf(late)).toBe('PRECONDITION_FAILED');
    expect(late.errors![0].extensions).toMatchObject({
      reason: 'DEPLOY_WINDOW',
      currentPlanId: second,
      deployBy: new Date(Date.parse(publishedAt) + 30 * 60_000).toISOString(),
    });
    expect(late.errors![0].message).toBe(
      `plan ${second} was published more than 30 minutes ago and had to start deploying by ${new Date(Date.parse(publishedAt) + 30 * 60_000).toISOString()}: plan again`,
    );
  });

  // proves: R52
  test('a plan may start deploying at the very minute its window ends', async () => {
    await environmentWith('window-edge', { deployWithinMinutes: 30 }, false);
    const [published] = await d.publish('window-edge', tokens.agent);
    world.advance(30 * 60);
    expect((await d.startOk(tokens.deployer, 'window-edge', published)).status).toBe('IN_PROGRESS');
  });
});

describe('R53: drift', () => {
  // proves: R53
  test('reportDrift moves the deployment sequence: proposals made before it turn OBSOLETE, a published plan made before it is not started', async () => {
    await world.createEnvironment('drifting', 'MONOTONIC', true);
    const generation = await world.acquire(tokens.agent, 'drifting', 600);
    const published = ok(
      await submit('drifting', generation, { basedOnDeploymentSequence: 0 }),
    ).submitPlan;
    ok(await approve(tokens.reviewer, published.id));
    const proposed = ok(
      await submit('drifting', generation, { basedOnDeploymentSequence: 0 }),
    ).submitPlan;

    expect(codeOf(await drift(tokens.agent, 'drifting', 'x'))).toBe('FORBIDDEN');
    const drifted = ok(
      await drift(tokens.checker, 'drifting', 'aws_s3_bucket.logs changed'),
    ).reportDrift;
    expect(drifted.deploymentSequence).toBe(1);
    expect(drifted.driftReportedAt).not.toBeNull();

    expect((await plan(proposed.id)).status).toBe('OBSOLETE');
    const start = await d.start(tokens.deployer, 'drifting', published.id);
    expect(codeOf(start)).toBe('PRECONDITION_FAILED');
    expect(start.errors![0].extensions).toMatchObject({
      reason: 'DEPLOYMENT_SEQUENCE',
      deploymentSequence: 1,
    });
    // A DEPLOYER reports drift too; the next deployment takes the sequence after it.
    ok(await drift(tokens.deployer, 'drifting', 'again'));
    const fresh = ok(
      await submit('drifting', generation, { basedOnDeploymentSequence: 2 }),
    ).submitPlan;
    ok(await approve(tokens.reviewer, fresh.id));
    expect((await d.startOk(tokens.deployer, 'drifting', fresh.id)).id).toBe('drifting#3');

    const audit = await world.auditEvents('drifting');
    expect(audit).toContainEqual(
      expect.objectContaining({ action: 'REPORT_DRIFT', outcome: 'ACCEPTED', actor: 'scanner' }),
    );
    expect(audit).toContainEqual(
      expect.objectContaining({
        action: 'PLAN_OBSOLETE',
        planId: proposed.id,
        detail: `${proposed.id} is OBSOLETE: drift was reported (deployment sequence 1): the plan was made against an earlier deployment sequence`,
      }),
    );
    expect(codeOf(await drift(tokens.checker, 'nowhere', 'x'))).toBe('NOT_FOUND');
  });
});
