/**
 * `planfence login` for a person (DESIGN §19): the command listens on a loopback address,
 * the person's browser (here: HTTP with a cookie jar, through the test provider's own
 * login form) signs in at the service, which redirects to the command with a one-time
 * code; the command exchanges it for a session token and stores it (0600). The token is a
 * bearer token of the person's session; `planfence login --logout` ends it. A code cannot be
 * exchanged twice, nor without the command's verifier.
 */
import { statSync } from 'node:fs';
import { ManualClock } from '../src/common/clock.js';
import { login } from '../src/cli/commands/login.js';
import {
  credentialsFile,
  NO_TOKEN,
  readCredential,
  storedToken,
} from '../src/cli/commands/login-store.js';
import { PLANFENCE_BIN, run } from './support/commands.js';
import { codeOf, ok, scratchDir } from './support/app.js';
import { CookieJar, signInOverHttp } from './support/oidc-provider.js';
import { type SignInWorld, startSignInWorld } from './support/sign-in.js';

let world: SignInWorld;
let config: { path: string; cleanup: () => void };
const previous = process.env.PLANFENCE_CONFIG_DIR;

beforeAll(async () => {
  world = await startSignInWorld({ clock: new ManualClock(Date.now()) });
  config = scratchDir();
  process.env.PLANFENCE_CONFIG_DIR = `${config.path}/planfence`;
});
afterAll(async () => {
  if (previous === undefined) delete process.env.PLANFENCE_CONFIG_DIR;
  else process.env.PLANFENCE_CONFIG_DIR = previous;
  config.cleanup();
  await world.close();
});

/** Runs `planfence login` and signs `sub` in at the address it prints; its output lines. */
async function loginAs(sub: string): Promise<{ code: number; out: string[]; landed: string }> {
  const out: string[] = [];
  let address!: (url: string) => void;
  const printed = new Promise<string>((resolve) => (address = resolve));
  const running = login(
    ['--url', world.app.url, '--no-browser'],
    (t) => out.push(t),
    (text) => address(/https?:\/\/\S+/.exec(text)![0]),
  );
  const landed = await signInOverHttp(await printed, sub);
  return { code: await running, out, landed: landed.body };
}

// proves: R40, R41
test('planfence login signs a person in through the browser and stores a session token (0600) that works as a bearer token; login --logout ends it', async () => {
  const { app } = world;
  const { code, out, landed } = await loginAs('u-rita');
  expect(code).toBe(0);
  expect(landed).toContain('Signed in. You can close this tab');
  expect(out[0]).toContain(`Signed in to ${app.url} as rita@example.com`);
  expect(statSync(credentialsFile()).mode & 0o777).toBe(0o600);
  expect(statSync(`${config.path}/planfence`).mode & 0o777).toBe(0o700);
  const token = storedToken(app.url)!;
  expect(token).toMatch(/^pfs_/);

  const me = ok(
    await app.gql(
      token,
      '{ whoami { name role person { subject email } } mySession { id csrfToken } }',
    ),
  );
  expect(me.whoami).toEqual({
    name: 'rita@example.com',
    role: 'REVIEWER',
    person: { subject: 'u-rita', email: 'rita@example.com' },
  });
  // A bearer token needs no CSRF header: changes go through (here: a harmless logout later).
  expect(me.mySession.id).toMatch(/^ses_/);

  const said: string[] = [];
  expect(await login(['--logout', '--url', app.url], (t) => said.push(t))).toBe(0);
  expect(said).toEqual([`Signed out of ${app.url}.`]);
  expect(readCredential(app.url)).toBeNull();
  expect(codeOf(await app.gql(token, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
});

test('a sign-in cookie changed in the browser to send the code or the person elsewhere is refused at the callback', async () => {
  const { app } = world;
  /** /auth/login's redirect to the provider, with its cookie edited by `edit`. */
  const started = async (query: string, edit: (pending: Record<string, any>) => void) => {
    const response = await fetch(`${app.url}/auth/login?${query}`, { redirect: 'manual' });
    expect(response.status).toBe(302);
    const jar = new CookieJar();
    jar.take(response);
    const pending = JSON.parse(
      Buffer.from(jar.cookies.get('planfence_login')!, 'base64url').toString('utf8'),
    ) as Record<string, any>;
    edit(pending);
    jar.cookies.set('planfence_login', Buffer.from(JSON.stringify(pending)).toString('base64url'));
    return { provider: response.headers.get('location')!, jar };
  };
  const elsewhere = (url: string) => url.startsWith('https://evil.example/');
  // The command line's flow, its loopback redirect changed to another site's address.
  const cli = await started(
    `cli_redirect=${encodeURIComponent('http://127.0.0.1:9/callback')}&cli_state=${'s'.repeat(20)}&cli_challenge=${'c'.repeat(43)}`,
    (pending) => (pending.c.redirect = 'https://evil.example/steal'),
  );
  const stolen = await signInOverHttp(cli.provider, 'u-rita', { jar: cli.jar, stopAt: elsewhere });
  expect(stolen.location).toBeNull();
  expect(stolen.status).toBe(400);
  expect(stolen.body).toContain('This sign-in was not started here');
  // The console's flow, its return path changed to another site.
  const consoleFlow = await started(
    'return=%2F',
    (pending) => (pending.r = 'https://evil.example/phish'),
  );
  const phished = await signInOverHttp(consoleFlow.provider, 'u-rita', {
    jar: consoleFlow.jar,
    stopAt: elsewhere,
  });
  expect(phished.location).toBeNull();
  expect(phished.status).toBe(400);
  // Unchanged, the same flow signs the person in and returns to the service's own path.
  const fine = await started('return=%2F', () => {});
  const home = await signInOverHttp(fine.provider, 'u-rita', {
    jar: fine.jar,
    stopAt: (url) => url === `${app.url}/`,
  });
  expect(home.location).toBe(`${app.url}/`);
});

// proves: R41
test('the one-time code works once, only with the verifier of the command that asked, and only for loopback redirects', async () => {
  const { app } = world;
  // A redirect that is not a loopback address is refused before the provider is asked.
  const refused = await fetch(
    `${app.url}/auth/login?cli_redirect=${encodeURIComponent('https://evil.example/cb')}&cli_state=${'s'.repeat(20)}&cli_challenge=${'c'.repeat(43)}`,
    { redirect: 'manual' },
  );
  expect(refused.status).toBe(400);

  // A code caught on its way (without the verifier) is worthless.
  const verifierless = await signInOverHttp(
    `${app.url}/auth/login?cli_redirect=${encodeURIComponent('http://127.0.0.1:9/callback')}&cli_state=${'s'.repeat(20)}&cli_challenge=${'c'.repeat(43)}`,
    'u-rita',
    { stopAt: (url) => url.startsWith('http://127.0.0.1:9/') },
  );
  const caught = new URL(verifierless.location!).searchParams.get('code')!;
  const attempt = await fetch(`${app.url}/auth/cli-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code: caught, verifier: 'not-the-verifier' }),
  });
  expect(attempt.status).toBe(401);

  // The command's own exchange works once: its code replayed is refused.
  const { code } = await loginAs('u-rita');
  expect(code).toBe(0);
  const again = await fetch(`${app.url}/auth/cli-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code: caught, verifier: 'x' }),
  });
  expect(again.status).toBe(401);
});

// proves: R41
test('the other commands use the stored session when given no token; planfence logout ends it and they ask for one', async () => {
  const { app } = world;
  expect((await loginAs('u-rita')).code).toBe(0);
  // The built command line, as a person runs it: no --token, no PLANFENCE_TOKEN.
  const env = { PLANFENCE_CONFIG_DIR: process.env.PLANFENCE_CONFIG_DIR!, PLANFENCE_TOKEN: '' };
  const planfence = (...args: string[]) =>
    run('node', [PLANFENCE_BIN, ...args, '--url', app.url], env);
  const listed = await planfence('env', 'list', '--json');
  expect(listed).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(listed.stdout)).toEqual(expect.any(Array));
  expect(await planfence('logout')).toMatchObject({
    code: 0,
    stdout: `Signed out of ${app.url}.\n`,
  });
  const after = await planfence('env', 'list');
  expect(after.code).toBe(2);
  expect(after.stderr).toContain(NO_TOKEN);
});
