/**
 * Reviews in Slack (DESIGN §20, R45–R47) against a local stand-in for Slack's Web API
 * (test/support/slack-api.ts) and requests signed with Slack's real v0 algorithm.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp, type TestApp } from './support/app.js';
import {
  approveValue,
  hasButtons,
  type PostedMessage,
  sendToService,
  signedForm,
  SlackApiServer,
} from './support/slack-api.js';
import { until } from './support/until.js';
import { ok, World } from './support/world.js';

const SECRET = 'slack-signing-secret-for-tests';
const TEAM = 'T0PLANFENCE';

let slack: SlackApiServer;
let app: TestApp;
let w: World;
let agent: string;
let alice: string;
let bob: string;
let viewer: string;
let ops: string;
let environments = 0;

beforeAll(async () => {
  slack = new SlackApiServer();
  await slack.start();
  const dir = mkdtempSync(join(tmpdir(), 'planfence-slack-'));
  const config = join(dir, 'slack.json');
  writeFileSync(
    config,
    JSON.stringify({
      botToken: slack.token,
      signingSecret: SECRET,
      apiUrl: slack.url,
      channels: [
        { environments: ['quiet-*'], channel: '#nowhere-else' },
        { environments: ['*'], channel: '#reviews' },
      ],
    }),
  );
  app = await startApp({ PLANFENCE_SLACK_CONFIG: config });
  w = new World(app);
  agent = await w.issue('agent', 'AGENT');
  alice = await w.issue('alice', 'REVIEWER');
  bob = await w.issue('bob', 'REVIEWER');
  viewer = await w.issue('vera', 'VIEWER');
  ops = await w.issue('ops', 'ADMIN');
  for (const [token, user] of [
    [alice, 'UALICE'],
    [bob, 'UBOB'],
    [viewer, 'UVERA'],
    [ops, 'UOPS'],
  ] as const)
    await link(token, user);
});

afterAll(async () => {
  await app?.close();
  await slack?.stop();
});

/** A new environment reviewed in #reviews, needing `approvals` approvals. */
async function environment(approvals = 1): Promise<string> {
  const name = `slack-${++environments}`;
  await w.createEnvironment(name, 'MONOTONIC');
  if (approvals !== 1)
    ok(
      await w.gql(
        w.admin,
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
        { input: { environment: name, approvalRules: [{ count: approvals }] } },
      ),
    );
  return name;
}

/** The message of plan `planId`, once it is posted (its title is the plan's). */
function messageOf(planId: string): Promise<PostedMessage> {
  return until(`the Slack message of ${planId}`, () =>
    [...slack.messages.values()].find((m) => JSON.stringify(m.blocks).includes(`plan ${planId})`)),
  );
}

function postsOf(planId: string) {
  return slack
    .callsOf('chat.postMessage')
    .filter((c) => JSON.stringify(c.body.blocks).includes(`plan ${planId})`));
}

function command(user: string, text: string) {
  return sendToService(
    app.url,
    '/slack/commands',
    signedForm(SECRET, {
      command: '/planfence',
      text,
      team_id: TEAM,
      user_id: user,
      channel_id: 'C00000001',
      trigger_id: `trigger-${Math.random()}`,
    }),
  );
}

/** What Slack sends when `user` clicks `action` of a message whose button carries `value`. */
function click(
  user: string,
  value: string,
  action = 'planfence_approve',
  team = TEAM,
): { body: string; timestamp: number; signature: string } {
  const payload = {
    type: 'block_actions',
    team: { id: team },
    user: { id: user, team_id: team },
    channel: { id: 'C00000001' },
    container: { type: 'message', channel_id: 'C00000001' },
    trigger_id: `trigger-${Math.random()}`,
    actions: [{ action_id: action, block_id: 'planfence_actions', value, type: 'button' }],
  };
  return signedForm(SECRET, { payload: JSON.stringify(payload) });
}

async function send(request: ReturnType<typeof click>) {
  return sendToService(app.url, '/slack/interactions', request);
}

/** Waits for the `n`th thing said to `user` alone and returns it. */
function said(user: string, n: number): Promise<string> {
  return until(`ephemeral #${n} to ${user}`, () => slack.ephemeralTo(user)[n - 1]);
}

/** `/planfence link` as `user`, then linkSlack(code) with `token` (the console's call). */
async function link(token: string, user: string): Promise<void> {
  const before = slack.ephemeralTo(user).length;
  expect((await command(user, 'link')).status).toBe(200);
  const text = await said(user, before + 1);
  const code = decodeURIComponent(/slack-link=([^|>]+)/.exec(text)![1]);
  const linked = ok(
    await w.gql(token, 'mutation($c: String!) { linkSlack(code: $c) { teamId userId linkedAt } }', {
      c: code,
    }),
  );
  expect(linked.linkSlack).toMatchObject({ teamId: TEAM, userId: user });
}

async function audit(environmentName: string) {
  return ok(
    await w.gql(
      w.admin,
      'query($e: String!) { auditEvents(environment: $e, first: 100) { action outcome code actor planId via detail } }',
      { e: environmentName },
    ),
  ).auditEvents as {
    action: string;
    outcome: string;
    code: string | null;
    actor: string;
    planId: string | null;
    via: string | null;
    detail: string | null;
  }[];
}

async function submitted(env: string, title = 'db change') {
  const generation = await w.acquire(agent, env);
  return w.submitOk(agent, env, generation, `content of ${title} ${Math.random()}`, { title });
}

describe('messages', () => {
  // proves: R22, R47
  test('a plan awaiting review gets one message; approvals, publication and supersession update it in place', async () => {
    const env = await environment(2);
    const plan = await submitted(env, 'first plan');
    const message = await messageOf(plan.id);
    expect(hasButtons(message.blocks)).toBe(true);
    expect(message.channel).toBe(slack.channelId('#reviews'));
    const shown = JSON.stringify(message.blocks);
    expect(shown).toContain(env);
    expect(shown).toContain('first plan');
    expect(shown).toContain('2 more');
    expect(shown).toContain(`/?plan=${encodeURIComponent(plan.id)}`);
    expect(JSON.parse(approveValue(message.blocks))).toMatchObject({
      p: plan.id,
      h: plan.contentHash,
      d: 0,
    });

    ok(await w.approve(alice, plan.id));
    await until('the first approval shown', () =>
      JSON.stringify(message.blocks).includes('*Approvals*: alice'),
    );
    expect(hasButtons(message.blocks)).toBe(true);
    expect(JSON.stringify(message.blocks)).toContain('1 more');

    ok(await w.approve(bob, plan.id));
    await until('publication shown', () => JSON.stringify(message.blocks).includes('Published'));
    expect(hasButtons(message.blocks)).toBe(false);

    const next = await submitted(env, 'second plan');
    ok(await w.approve(alice, next.id));
    ok(await w.approve(bob, next.id));
    await until('supersession shown', () => JSON.stringify(message.blocks).includes('Superseded'));
    expect(hasButtons(message.blocks)).toBe(false);
    // One message per plan, every change an update of it.
    expect(postsOf(plan.id)).toHaveLength(1);
    expect(postsOf(next.id)).toHaveLength(1);
    const updates = slack
      .callsOf('chat.update')
      .filter((c) => c.body.ts === message.ts && c.body.channel === message.channel);
    expect(updates.length).toBeGreaterThanOrEqual(3);
  });

  // proves: R22
  test("Slack's 429 Retry-After and a 500 are retried: the plan still gets exactly one message", async () => {
    const env = await environment();
    slack.fail('chat.postMessage', { status: 500 });
    slack.fail('chat.postMessage', { status: 429, retryAfter: 30 });
    const plan = await submitted(env, 'rate limited');
    // The 500 is retried after a backoff on the service's clock.
    await until('the 500', () => slack.callsOf('chat.postMessage', 500).length >= 1);
    w.advance(2);
    await until('the 429', () => slack.callsOf('chat.postMessage', 429).length >= 1);
    // Retry-After is 30 s on the service's clock: nothing is sent before it passes.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(postsOf(plan.id)).toHaveLength(0);
    w.advance(31);
    const message = await messageOf(plan.id);
    expect(hasButtons(message.blocks)).toBe(true);
    expect(postsOf(plan.id)).toHaveLength(1);
  });

  // proves: R22
  test('a Terraform plan: its changes in words, destroys and replacements first, and its policy warnings', async () => {
    const env = await environment();
    ok(
      await w.gql(
        w.admin,
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
        {
          input: {
            environment: env,
            planPolicies: [
              {
                name: 'no-destroys',
                expression: 'summary.destroy + summary.replace > 0',
                effect: 'WARN',
                message: 'this plan destroys something',
              },
            ],
          },
        },
      ),
    );
    const generation = await w.acquire(agent, env);
    const { submitPlan } = ok(
      await w.gql(
        agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
        {
          input: {
            environment: env,
            generation,
            idempotencyKey: `tf-${env}`,
            title: 'terraform',
            contentType: 'TERRAFORM_PLAN_JSON',
            content: readFileSync(
              join(process.cwd(), 'test/fixtures/terraform/mixed.json'),
              'utf8',
            ),
          },
        },
      ),
    );
    const shown = JSON.stringify((await messageOf(submitPlan.id)).blocks);
    expect(shown).toMatch(
      /\*Changes\*: :warning: \d+ to destroy, \d+ to replace, \d+ to add, \d+ to change/,
    );
    expect(shown).toContain('no-destroys: this plan destroys something');
  });

  // proves: R22
  test("the plan's pending checks, until they pass", async () => {
    const env = await environment();
    ok(
      await w.gql(
        w.admin,
        'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
        { input: { environment: env, requiredChecks: ['scan'] } },
      ),
    );
    const checker = await w.issue(`checker-${env}`, 'CHECKER');
    const plan = await submitted(env, 'checked');
    const message = await messageOf(plan.id);
    expect(JSON.stringify(message.blocks)).toContain('*Pending checks*: scan');
    ok(
      await w.gql(
        checker,
        'mutation($input: ReportCheckInput!) { reportCheck(input: $input) { id } }',
        { input: { planId: plan.id, name: 'scan', status: 'SUCCESS' } },
      ),
    );
    await until(
      'the check shown passed',
      () => !JSON.stringify(message.blocks).includes('Pending checks'),
    );
    expect(hasButtons(message.blocks)).toBe(true);
  });

  // proves: R22
  test('an environment no channel reviews gets no message; a plan published at submit gets none either', async () => {
    const auto = `quietless-${++environments}`;
    await w.createEnvironment(auto, 'MONOTONIC', false);
    const generation = await w.acquire(agent, auto);
    const plan = await w.submitOk(agent, auto, generation, 'auto', { title: 'auto' });
    const other = await environment();
    const later = await submitted(other, 'later');
    await messageOf(later.id);
    expect(postsOf(plan.id)).toHaveLength(0);
  });
});

describe('clicks', () => {
  // proves: R45, R46, R47
  test('a valid click from a linked reviewer publishes, as that reviewer, via slack; a repeated click answers its first outcome', async () => {
    const env = await environment();
    const plan = await submitted(env, 'click to publish');
    const message = await messageOf(plan.id);
    const value = approveValue(message.blocks);
    const before = slack.ephemeralTo('UALICE').length;
    const answer = await send(click('UALICE', value));
    expect(answer.status).toBe(200);
    expect(answer.ms).toBeLessThan(3000);
    expect(await said('UALICE', before + 1)).toContain('published');
    expect((await w.plan(plan.id))!.status).toBe('PUBLISHED');
    expect((await w.plan(plan.id))!.reviewedBy).toBe('alice');
    const recorded = ok(
      await w.gql<{ plan: { approvals: { approver: string; via: string | null }[] } }>(
        w.admin,
        'query($id: ID!) { plan(id: $id) { approvals { approver via } } }',
        { id: plan.id },
      ),
    ).plan.approvals;
    expect(recorded).toEqual([{ approver: 'alice', via: 'slack' }]);
    await until('the message without buttons', () => !hasButtons(message.blocks));
    const events = await audit(env);
    expect(events).toContainEqual(
      expect.objectContaining({
        action: 'APPROVE_PLAN',
        outcome: 'ACCEPTED',
        actor: 'alice',
        via: 'slack',
        planId: plan.id,
      }),
    );
    // The same button again: its first outcome, nothing decided again.
    expect((await send(click('UALICE', value))).status).toBe(200);
    expect(await said('UALICE', before + 2)).toMatch(/You clicked this before: .*published/);
    const approvals = (await audit(env)).filter(
      (e) => e.action === 'APPROVE_PLAN' && e.actor === 'alice',
    );
    expect(approvals).toHaveLength(1);
  });

  // proves: R45
  test('a bad signature, an old timestamp or a replayed body → 401, and nothing changes', async () => {
    const env = await environment();
    const plan = await submitted(env, 'signatures');
    const message = await messageOf(plan.id);
    const value = approveValue(message.blocks);
    const good = click('UALICE', value);
    const forged = {
      ...good,
      signature: good.signature.replace(/.$/, (c) => (c === '0' ? '1' : '0')),
    };
    expect((await send(forged)).status).toBe(401);
    const otherSecret = signedForm('not-the-secret', { payload: 'x' });
    expect((await send({ ...good, signature: otherSecret.signature })).status).toBe(401);
    const old = signedForm(
      SECRET,
      { payload: new URLSearchParams(good.body).get('payload')! },
      Math.floor(Date.now() / 1000) - 6 * 60,
    );
    expect((await send(old)).status).toBe(401);
    // The body of a signed request with another timestamp: the signature no longer matches.
    expect((await send({ ...good, timestamp: good.timestamp + 1 })).status).toBe(401);
    const noHeaders = await fetch(`${app.url}/slack/interactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: good.body,
    });
    expect(noHeaders.status).toBe(401);
    const commandForged = await sendToService(app.url, '/slack/commands', {
      ...signedForm(SECRET, { text: 'link', team_id: TEAM, user_id: 'UALICE', channel_id: 'C1' }),
      signature: 'v0=00',
    });
    expect(commandForged.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await w.plan(plan.id))!.status).toBe('PROPOSED');
    expect((await audit(env)).filter((e) => e.action === 'APPROVE_PLAN')).toHaveLength(0);

    // The signed request itself is answered once; the same request again is a replay.
    expect((await send(good)).status).toBe(200);
    await until('published', async () => (await w.plan(plan.id))!.status === 'PUBLISHED');
    const eventsAfter = (await audit(env)).length;
    expect((await send(good)).status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await audit(env)).length).toBe(eventsAfter);
  });

  // proves: R46, R47
  test('an unlinked user, a VIEWER, the submitter, a superseded message and changed content are refused with the reason, audited', async () => {
    const env = await environment();
    const plan = await submitted(env, 'refusals');
    const message = await messageOf(plan.id);
    const value = approveValue(message.blocks);

    expect((await send(click('USTRANGER', value))).status).toBe(200);
    expect(await said('USTRANGER', 1)).toContain('/planfence link');

    const vera = slack.ephemeralTo('UVERA').length;
    await send(click('UVERA', value));
    expect(await said('UVERA', vera + 1)).toContain('FORBIDDEN');

    // The submitter: ops (ADMIN) submits, then clicks Approve on its own plan.
    ok(await w.release(agent, env, plan.generation));
    const opsGeneration = await w.acquire(ops, env);
    const own = await w.submitOk(ops, env, opsGeneration, 'own plan', { title: 'own' });
    const ownMessage = await messageOf(own.id);
    const opsSaid = slack.ephemeralTo('UOPS').length;
    await send(click('UOPS', approveValue(ownMessage.blocks)));
    expect(await said('UOPS', opsSaid + 1)).toContain('SELF_APPROVAL');

    // The first plan's generation is below the fence now: its message is superseded.
    await until('the first message redrawn as obsolete', () =>
      JSON.stringify(message.blocks).includes('Obsolete'),
    );
    const bobSaid = slack.ephemeralTo('UBOB').length;
    await send(click('UBOB', value));
    expect(await said('UBOB', bobSaid + 1)).toMatch(/STALE_GENERATION|INVALID_PLAN_STATE/);

    // The content the message pinned is not the plan's any more.
    const pinned = JSON.parse(approveValue(ownMessage.blocks)) as {
      p: string;
      h: string;
      d: number;
    };
    await send(click('UBOB', JSON.stringify({ ...pinned, h: 'f'.repeat(64) })));
    expect(await said('UBOB', bobSaid + 2)).toContain('PRECONDITION_FAILED');
    // ... and the deployment sequence it pinned.
    await send(click('UBOB', JSON.stringify({ ...pinned, d: 7 })));
    expect(await said('UBOB', bobSaid + 3)).toContain('deployment sequence 7');

    expect((await w.plan(own.id))!.status).toBe('PROPOSED');
    const events = await audit(env);
    const refused = (actor: string, code: string) =>
      expect(events).toContainEqual(
        expect.objectContaining({ outcome: 'REJECTED', actor, code, via: 'slack' }),
      );
    refused(`slack:${TEAM}/USTRANGER`, 'UNAUTHENTICATED');
    refused('vera', 'FORBIDDEN');
    refused('ops', 'SELF_APPROVAL');
    expect(events).toContainEqual(
      expect.objectContaining({
        outcome: 'REJECTED',
        actor: 'bob',
        planId: plan.id,
        via: 'slack',
      }),
    );
    refused('bob', 'PRECONDITION_FAILED');
  });

  // proves: R47
  test('Reject asks for a reason in a modal; its submission rejects the plan and the message loses its buttons', async () => {
    const env = await environment();
    const plan = await submitted(env, 'to reject');
    const message = await messageOf(plan.id);
    const opened = slack.callsOf('views.open').length;
    await send(click('UBOB', approveValue(message.blocks), 'planfence_reject'));
    const call = await until('views.open', () => slack.callsOf('views.open')[opened]);
    const view = call.body.view;
    expect(view.callback_id).toBe('planfence_reject_reason');
    const submission = (reason: string) =>
      signedForm(SECRET, {
        payload: JSON.stringify({
          type: 'view_submission',
          team: { id: TEAM },
          user: { id: 'UBOB', team_id: TEAM },
          view: {
            callback_id: view.callback_id,
            private_metadata: view.private_metadata,
            state: {
              values: { reason: { reason_input: { type: 'plain_text_input', value: reason } } },
            },
          },
        }),
      });
    const empty = await send(submission('  '));
    expect(JSON.parse(empty.body)).toMatchObject({ response_action: 'errors' });
    expect((await send(submission('drops the prod table'))).status).toBe(200);
    await until('rejected', async () => (await w.plan(plan.id))!.status === 'REJECTED');
    expect((await w.plan(plan.id))!.rejectionReason).toBe('drops the prod table');
    await until('the message shows the rejection', () => !hasButtons(message.blocks));
    expect(JSON.stringify(message.blocks)).toContain('drops the prod table');
    expect(await audit(env)).toContainEqual(
      expect.objectContaining({
        action: 'REJECT_PLAN',
        outcome: 'ACCEPTED',
        actor: 'bob',
        via: 'slack',
      }),
    );
  });
});

describe('linking', () => {
  // proves: R46
  test('a link code binds once, within 10 minutes; unlinkSlack by the person or an ADMIN; slackLinks lists them', async () => {
    const me = await w.issue('carol', 'REVIEWER');
    expect((await command('UCAROL', 'link')).status).toBe(200);
    const text = await said('UCAROL', 1);
    const code = decodeURIComponent(/slack-link=([^|>]+)/.exec(text)![1]);
    ok(await w.gql(me, 'mutation($c: String!) { linkSlack(code: $c) { userId } }', { c: code }));
    const again = await w.gql(bob, 'mutation($c: String!) { linkSlack(code: $c) { userId } }', {
      c: code,
    });
    expect(again.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const mine = ok(await w.gql(me, '{ whoami { name slackLinks { teamId userId linkedAt } } }'));
    expect(mine.whoami.slackLinks).toEqual([
      expect.objectContaining({ teamId: TEAM, userId: 'UCAROL' }),
    ]);

    // A code older than 10 minutes binds nothing.
    await command('UCAROL2', 'link');
    const late = decodeURIComponent(/slack-link=([^|>]+)/.exec(await said('UCAROL2', 1))![1]);
    w.advance(10 * 60 + 1);
    const expired = await w.gql(me, 'mutation($c: String!) { linkSlack(code: $c) { userId } }', {
      c: late,
    });
    expect(expired.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');

    const other = await w.gql(
      bob,
      'mutation { unlinkSlack(teamId: "T0PLANFENCE", userId: "UCAROL") }',
    );
    expect(other.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(
      ok(await w.gql(me, 'mutation { unlinkSlack(teamId: "T0PLANFENCE", userId: "UCAROL") }'))
        .unlinkSlack,
    ).toBe(true);
    expect(ok(await w.gql(me, '{ whoami { slackLinks { userId } } }')).whoami.slackLinks).toEqual(
      [],
    );
    await link(me, 'UCAROL');
    expect(
      ok(await w.gql(w.admin, 'mutation { unlinkSlack(teamId: "T0PLANFENCE", userId: "UCAROL") }'))
        .unlinkSlack,
    ).toBe(true);
  });

  // proves: R46
  test("the console serves the link page's module, which calls linkSlack with the address's code", async () => {
    const served = await fetch(`${app.url}/js/slack-link.js`);
    expect(served.status).toBe(200);
    const code = await served.text();
    expect(code).toContain('slack-link');
    expect(code).toContain('linkSlack(code: $code)');
    expect(await (await fetch(`${app.url}/js/main.js`)).text()).toContain("from './slack-link.js'");
  });

  // proves: R46
  test('/planfence status ENV answers the current plan, lease, queue and active deployment to the user alone', async () => {
    const env = await environment();
    const plan = await submitted(env, 'status plan');
    ok(await w.approve(alice, plan.id));
    const before = slack.ephemeralTo('UALICE').length;
    await command('UALICE', `status ${env}`);
    const text = await said('UALICE', before + 1);
    expect(text).toContain(`Current plan: ${plan.id}`);
    expect(text).toContain('Lease: held by');
    expect(text).toContain('Queue: empty');
    expect(text).toContain('Active deployment: none');
    const call = slack
      .callsOf('chat.postEphemeral')
      .filter((c) => c.body.user === 'UALICE')
      .at(-1)!;
    expect(call.body.user).toBe('UALICE');
    await command('UNOBODY', `status ${env}`);
    expect(await said('UNOBODY', 1)).toContain('/planfence link');
  });
});
