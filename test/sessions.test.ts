/**
 * People's sessions (DESIGN §19, R40–R43), over HTTP against the real service and the test
 * OpenID provider (its own login form, driven with a cookie jar): the cookie's flags; the
 * CSRF header and Origin a cookie's change needs (R42); logout, the idle timeout (test
 * clock), a revoked principal and an ADMIN's endSession ending a session at once; a person
 * no rule matches is refused with nothing created; approvals and their audit events name
 * the person (R43), and four eyes holds between the submitter and the person.
 */
import WebSocket from 'ws';
import { Database, select } from '../src/database/database.js';
import {
  ADMIN_TOKEN,
  codeOf,
  ok,
  scratchDatabase,
  startApp,
  TEST_DATABASE,
} from './support/app.js';
import { CookieJar } from './support/oidc-provider.js';
import {
  cookieGql,
  csrfOf,
  loginsConfig,
  registerConsole,
  sessionSetCookie,
  signIn,
  type SignInWorld,
  startSignInWorld,
} from './support/sign-in.js';
import { startProvider } from './support/oidc-provider.js';
import { PEOPLE } from './support/sign-in.js';
import { World } from './support/world.js';

const WHOAMI = '{ whoami { name role groups person { issuer subject email name } } }';
const CREATE =
  'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }';

describe('people sign in and hold sessions', () => {
  let world: SignInWorld;
  beforeAll(async () => {
    world = await startSignInWorld({ idleMinutes: 30 });
  });
  afterAll(() => world.close());

  // proves: R40
  it('a person signs in through the provider: a principal with the rule role, groups and person; the same (issuer, subject) is the same principal', async () => {
    const { app, provider } = world;
    const { jar, landed } = await signIn(app, 'u-rita');
    expect(landed.status).toBe(200);
    expect(landed.url).toBe(`${app.url}/`);
    const me = ok(await cookieGql(app, jar, WHOAMI)).whoami;
    expect(me).toEqual({
      name: 'rita@example.com',
      role: 'REVIEWER',
      groups: ['reviewers'],
      person: {
        issuer: provider.issuer,
        subject: 'u-rita',
        email: 'rita@example.com',
        name: 'Rita Reviewer',
      },
    });
    // Signed in again (a new browser): the same principal, a second session.
    provider.setAccount({ ...PEOPLE[1], name: 'Rita R. Reviewer' });
    const again = await signIn(app, 'u-rita');
    const me2 = ok(await cookieGql(app, again.jar, WHOAMI)).whoami;
    expect(me2.name).toBe('rita@example.com');
    expect(me2.person.name).toBe('Rita R. Reviewer');
    const principals = ok(
      await app.gql(ADMIN_TOKEN, '{ principals { name person { subject } } }'),
    ).principals;
    expect(principals.filter((p: any) => p.person?.subject === 'u-rita')).toHaveLength(1);
    const sessions = ok(
      await app.gql(
        ADMIN_TOKEN,
        '{ sessions(principal: "rita@example.com") { id csrfToken principal { name } } }',
      ),
    ).sessions;
    expect(sessions).toHaveLength(2);
    // Nobody's csrfToken is shown but in mySession.
    expect(
      sessions.every((s: any) => s.csrfToken === null && s.principal.name === 'rita@example.com'),
    ).toBe(true);
  });

  // proves: R41
  it('the session cookie is HttpOnly, SameSite=Lax, not Secure on loopback; its secret is stored only hashed', async () => {
    const { app } = world;
    const { jar } = await signIn(app, 'u-rob');
    const line = sessionSetCookie(jar)!;
    expect(line).toMatch(/; HttpOnly/);
    expect(line).toMatch(/; SameSite=Lax/);
    expect(line).toMatch(/; Path=\//);
    expect(line).not.toMatch(/Secure/);
    const secret = jar.cookies.get('planfence_session')!;
    const rows = await app.app
      .get(Database)
      .read((m) => select<{ token_hash: string }>(m, 'SELECT token_hash FROM sessions', {}));
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(secret);
  });

  // proves: R40
  it('a person no rule matches is refused on a page, the attempt recorded, nothing created', async () => {
    const { app } = world;
    const before = ok(await app.gql(ADMIN_TOKEN, '{ principals { name } }')).principals.length;
    for (const sub of ['u-nemo', 'u-olga']) {
      const { jar, landed } = await signIn(app, sub);
      expect(landed.status).toBe(403);
      expect(landed.body).toContain('No sign-in rule of this service matches your account');
      expect(jar.cookies.has('planfence_session')).toBe(false);
    }
    expect(ok(await app.gql(ADMIN_TOKEN, '{ principals { name } }')).principals).toHaveLength(
      before,
    );
    const recorded = await app.app
      .get(Database)
      .read((m) =>
        select<{ subject: string; outcome: string; code: string }>(
          m,
          "SELECT subject, outcome, code FROM oidc_exchanges WHERE outcome = 'REJECTED' ORDER BY id",
          {},
        ),
      );
    expect(recorded.map((r) => [r.subject, r.outcome, r.code])).toEqual([
      ['u-nemo', 'REJECTED', 'FORBIDDEN'],
      ['u-olga', 'REJECTED', 'FORBIDDEN'],
    ]);
    const sessions = await app.app
      .get(Database)
      .read((m) =>
        select<{ n: number }>(
          m,
          "SELECT count(*) AS n FROM sessions WHERE principal IN ('nemo@example.com', 'olga@elsewhere.test')",
          {},
        ),
      );
    expect(Number(sessions[0].n)).toBe(0);
  });

  // proves: R42
  it('a change made with the cookie needs the CSRF header and the service Origin: else FORBIDDEN and nothing changes', async () => {
    const { app } = world;
    const { jar } = await signIn(app, 'u-ada');
    const csrf = await csrfOf(app, jar);
    const input = (name: string) => ({ input: { name, mode: 'MONOTONIC', requireApproval: true } });
    // Reads need no header.
    expect(ok(await cookieGql(app, jar, WHOAMI, {}, { origin: null })).whoami.role).toBe('ADMIN');

    const missing = await cookieGql(app, jar, CREATE, input('csrf-missing'));
    expect(codeOf(missing)).toBe('FORBIDDEN');
    expect(missing.errors![0].message).toContain('x-planfence-csrf');
    const wrong = await cookieGql(app, jar, CREATE, input('csrf-wrong'), { csrf: 'x'.repeat(43) });
    expect(codeOf(wrong)).toBe('FORBIDDEN');
    const foreign = await cookieGql(app, jar, CREATE, input('csrf-foreign'), {
      csrf,
      origin: 'https://evil.example',
    });
    expect(codeOf(foreign)).toBe('FORBIDDEN');
    expect(foreign.errors![0].message).toContain('Origin');
    const noOrigin = await cookieGql(app, jar, CREATE, input('csrf-no-origin'), {
      csrf,
      origin: null,
    });
    expect(codeOf(noOrigin)).toBe('FORBIDDEN');
    // A browser's own word that the request is cross-site, without an Origin: refused too.
    const crossSite = await cookieGql(app, jar, CREATE, input('csrf-cross-site'), {
      csrf,
      origin: null,
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(codeOf(crossSite)).toBe('FORBIDDEN');
    const environments = ok(await app.gql(ADMIN_TOKEN, '{ environments { name } }')).environments;
    expect(environments.map((e: any) => e.name)).not.toEqual(
      expect.arrayContaining(['csrf-missing']),
    );
    for (const name of [
      'csrf-missing',
      'csrf-wrong',
      'csrf-foreign',
      'csrf-no-origin',
      'csrf-cross-site',
    ])
      expect(environments.some((e: any) => e.name === name)).toBe(false);

    // Another session's token does not do either.
    const other = await signIn(app, 'u-ada');
    const otherCsrf = await csrfOf(app, other.jar);
    expect(
      codeOf(await cookieGql(app, jar, CREATE, input('csrf-other'), { csrf: otherCsrf })),
    ).toBe('FORBIDDEN');

    const done = await cookieGql(app, jar, CREATE, input('csrf-ok'), { csrf });
    expect(ok(done).createEnvironment.name).toBe('csrf-ok');
    // Bearer tokens need neither.
    const bearer = await app.gql(ADMIN_TOKEN, CREATE, input('bearer-ok'));
    expect(ok(bearer).createEnvironment.name).toBe('bearer-ok');
  });

  // proves: R42
  it('a WebSocket opened with the cookie (any Origin) is not authenticated by it: without a bearer token it is closed', async () => {
    const { app } = world;
    const { jar } = await signIn(app, 'u-ada');
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws', {
      headers: { cookie: jar.header(), origin: 'https://evil.example' },
    });
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    const { code, reason } = await closed;
    expect(code).toBe(4403);
    expect(reason).toContain('UNAUTHENTICATED');
  });

  // proves: R41
  it('logout ends the session at once and clears the cookie', async () => {
    const { app } = world;
    const { jar } = await signIn(app, 'u-rob');
    const csrf = await csrfOf(app, jar);
    const secret = jar.cookies.get('planfence_session')!;
    const out = await cookieGql(app, jar, 'mutation { logout }', {}, { csrf });
    expect(ok(out).logout).toBe(true);
    expect(out.setCookie.some((c) => /^planfence_session=;.*Max-Age=0/.test(c))).toBe(true);
    // The old secret, sent again, no longer authenticates.
    const replay = new CookieJar();
    replay.cookies.set('planfence_session', secret);
    expect(codeOf(await cookieGql(app, replay, WHOAMI))).toBe('UNAUTHENTICATED');
  });

  // proves: R41
  it('an unused session ends after idleMinutes by the service clock; a used one lives on', async () => {
    const { app } = world;
    const idle = await signIn(app, 'u-rob');
    const used = await signIn(app, 'u-rob');
    app.clock.advance(20 * 60_000);
    ok(await cookieGql(app, used.jar, WHOAMI));
    app.clock.advance(15 * 60_000);
    const refused = await cookieGql(app, idle.jar, WHOAMI);
    expect(codeOf(refused)).toBe('UNAUTHENTICATED');
    expect(refused.errors![0].message).toContain('unused for 30 minutes');
    expect(ok(await cookieGql(app, used.jar, WHOAMI)).whoami.name).toBe('rob@example.com');
  });

  // proves: R41
  it('revoking the principal and endSession end its sessions at once', async () => {
    const { app } = world;
    const a = await signIn(app, 'u-rob');
    const b = await signIn(app, 'u-rob');
    const mine = ok(await cookieGql(app, a.jar, '{ mySession { id } }')).mySession.id;
    expect(
      ok(await app.gql(ADMIN_TOKEN, 'mutation($id: ID!) { endSession(id: $id) }', { id: mine }))
        .endSession,
    ).toBe(true);
    expect(codeOf(await cookieGql(app, a.jar, WHOAMI))).toBe('UNAUTHENTICATED');
    ok(await cookieGql(app, b.jar, WHOAMI));
    ok(await app.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "rob@example.com") { name } }'));
    expect(codeOf(await cookieGql(app, b.jar, WHOAMI))).toBe('UNAUTHENTICATED');
    // A revoked principal cannot sign in again.
    const refused = await signIn(app, 'u-rob');
    expect(refused.landed.status).toBe(403);
    expect(refused.landed.body).toContain('was revoked');
  });

  // proves: R43
  it('an approval by a signed-in person names the person; its audit event too; four eyes holds between submitter and person', async () => {
    const { app, provider } = world;
    const w = new World(app);
    await w.createEnvironment('people-prod', 'MONOTONIC');
    const agent = await w.issue('people-agent', 'AGENT');
    const generation = await w.acquire(agent, 'people-prod');
    const plan = await w.submitOk(agent, 'people-prod', generation, 'resource "x" {}');
    const { jar } = await signIn(app, 'u-rita');
    const csrf = await csrfOf(app, jar);
    const approved = await cookieGql(
      app,
      jar,
      `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { status approvals { approver person { issuer subject email name } } } }`,
      { input: { planId: plan.id } },
      { csrf },
    );
    const result = ok(approved).approvePlan;
    expect(result.status).toBe('PUBLISHED');
    expect(result.approvals).toEqual([
      {
        approver: 'rita@example.com',
        person: {
          issuer: provider.issuer,
          subject: 'u-rita',
          email: 'rita@example.com',
          name: expect.any(String),
        },
      },
    ]);
    const events = (await w.auditEvents('people-prod')) as any[];
    const approval = events.find(
      (e: any) => e.action === 'APPROVE_PLAN' && e.outcome === 'ACCEPTED',
    );
    expect(approval.actor).toBe('rita@example.com');
    expect(approval.detail).toContain('person:');
    expect(approval.detail).toContain('rita@example.com');
    expect(approval.detail).toContain(`subject u-rita at ${provider.issuer}`);

    // Four eyes: the person who submitted may not approve, whichever session they use.
    ok(await w.release(agent, 'people-prod', generation));
    const { jar: adaJar } = await signIn(app, 'u-ada');
    const adaCsrf = await csrfOf(app, adaJar);
    const generation2 = ok(
      await cookieGql(
        app,
        adaJar,
        'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }',
        { input: { environment: 'people-prod', ttlSeconds: 60 } },
        { csrf: adaCsrf },
      ),
    ).acquireLease.generation;
    const own = ok(
      await cookieGql(
        app,
        adaJar,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
        {
          input: {
            environment: 'people-prod',
            generation: generation2,
            content: 'resource "y" {}',
            idempotencyKey: 'own-plan',
          },
        },
        { csrf: adaCsrf },
      ),
    ).submitPlan;
    const second = await signIn(app, 'u-ada');
    const selfApproval = await cookieGql(
      app,
      second.jar,
      'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { status } }',
      { input: { planId: own.id } },
      { csrf: await csrfOf(app, second.jar) },
    );
    expect(codeOf(selfApproval)).toBe('SELF_APPROVAL');
    const refusal = ((await w.auditEvents('people-prod')) as any[]).find(
      (e: any) => e.action === 'APPROVE_PLAN' && e.outcome === 'REJECTED',
    );
    expect(refusal.detail).toContain('subject u-ada');
  });
});

(TEST_DATABASE === 'postgres' ? describe : describe.skip)('sessions across instances', () => {
  // proves: R41
  it('a principal revoked on one instance: its session ends on the other at once; logout on one holds on the other', async () => {
    const provider = await startProvider({ accounts: PEOPLE });
    const config = loginsConfig(provider.issuer);
    const database = await scratchDatabase(true);
    const env = { ...config.env, DATABASE_URL: database.url };
    const one = await startApp(env, null);
    const two = await startApp(env, null);
    try {
      registerConsole(provider, [one, two]);
      const { jar } = await signIn(one, 'u-rita');
      // The cookie works on the other instance too.
      expect(ok(await cookieGql(two, jar, WHOAMI)).whoami.name).toBe('rita@example.com');
      const second = await signIn(one, 'u-rita');
      const secret = second.jar.cookies.get('planfence_session')!;
      const csrf = await csrfOf(two, second.jar);
      ok(await cookieGql(two, second.jar, 'mutation { logout }', {}, { csrf, origin: two.url }));
      const replay = new CookieJar();
      replay.cookies.set('planfence_session', secret);
      expect(codeOf(await cookieGql(one, replay, WHOAMI))).toBe('UNAUTHENTICATED');
      expect(ok(await cookieGql(one, jar, WHOAMI)).whoami.name).toBe('rita@example.com');
      ok(await two.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "rita@example.com") { name } }'));
      expect(codeOf(await cookieGql(one, jar, WHOAMI))).toBe('UNAUTHENTICATED');
    } finally {
      await one.close();
      await two.close();
      await provider.close();
      config.cleanup();
    }
  });
});
