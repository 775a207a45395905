/**
 * People signing in, for tests (DESIGN §19): the service started with `logins` pointing at
 * the test provider (test/support/oidc-provider.ts), a person signing in over HTTP with a
 * cookie jar, and GraphQL sent with that cookie (and, for changes, the CSRF header and Origin).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ManualClock } from '../../src/common/clock.js';
import { type GqlResult, scratchDir, startApp, type TestApp } from './app.js';
import {
  consoleClient,
  CookieJar,
  type ProviderAccount,
  signInOverHttp,
  startProvider,
  type StartedProvider,
} from './oidc-provider.js';

export const CONSOLE_CLIENT = 'planfence-console';
export const CONSOLE_SECRET = 'console-secret-for-tests';

/** Login rules for tests: admins, reviewers, a deployer; anyone else is refused. */
export const TEST_RULES = [
  {
    claims: { groups: 'platform-admins' },
    principal: '{email}',
    role: 'ADMIN',
    groups: ['admins'],
  },
  {
    claims: { groups: 'reviewers', email: '*@example.com' },
    principal: '{email}',
    role: 'REVIEWER',
    groups: ['reviewers'],
  },
  { claims: { groups: 'deployers' }, principal: '{email}', role: 'DEPLOYER', groups: [] },
];

export const PEOPLE: ProviderAccount[] = [
  { sub: 'u-ada', email: 'ada@example.com', name: 'Ada Admin', groups: ['platform-admins'] },
  {
    sub: 'u-rita',
    email: 'rita@example.com',
    name: 'Rita Reviewer',
    groups: ['staff', 'reviewers'],
  },
  { sub: 'u-rob', email: 'rob@example.com', name: 'Rob Reviewer', groups: ['reviewers'] },
  { sub: 'u-olga', email: 'olga@elsewhere.test', name: 'Olga Outsider', groups: ['reviewers'] },
  { sub: 'u-nemo', email: 'nemo@example.com', name: 'Nemo Nobody', groups: ['staff'] },
];

export interface SignInWorld {
  provider: StartedProvider;
  app: TestApp;
  /** The OIDC configuration file's path (to start more instances with it). */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** The OIDC configuration with `logins` for `issuer`, as a file; its env for startApp. */
export function loginsConfig(
  issuer: string,
  options: { idleMinutes?: number; sessionHours?: number } = {},
): { env: Record<string, string>; cleanup: () => void } {
  const dir = scratchDir();
  const path = join(dir.path, 'oidc.json');
  writeFileSync(
    path,
    JSON.stringify({
      logins: [
        {
          issuer,
          clientId: CONSOLE_CLIENT,
          clientSecret: CONSOLE_SECRET,
          scopes: ['openid', 'email', 'profile', 'groups'],
          rules: TEST_RULES,
          idleMinutes: options.idleMinutes ?? 30,
          sessionHours: options.sessionHours ?? 8,
          label: 'Example SSO',
        },
      ],
    }),
  );
  return { env: { PLANFENCE_OIDC_CONFIG: path }, cleanup: dir.cleanup };
}

/** The provider, and the service configured to sign people in with it. */
export async function startSignInWorld(
  options: { env?: Record<string, string>; clock?: ManualClock | null; idleMinutes?: number } = {},
): Promise<SignInWorld> {
  const provider = await startProvider({ accounts: PEOPLE });
  const config = loginsConfig(provider.issuer, { idleMinutes: options.idleMinutes });
  const env = { ...config.env, ...(options.env ?? {}) };
  const app = await startApp(env, options.clock);
  registerConsole(provider, [app]);
  return {
    provider,
    app,
    env,
    async close() {
      await app.close();
      await provider.close();
      config.cleanup();
    },
  };
}

/** The console client with the callback of each of the apps. */
export function registerConsole(provider: StartedProvider, apps: TestApp[]): void {
  provider.registerClient(
    consoleClient({
      clientId: CONSOLE_CLIENT,
      clientSecret: CONSOLE_SECRET,
      redirectUris: apps.map((app) => `${app.url}/auth/callback`),
    }),
  );
}

/** A person's browser, over HTTP: the cookies it holds. */
export interface Browser {
  jar: CookieJar;
  /** The last page the sign-in ended on. */
  landed: { url: string; status: number; body: string };
}

/** `sub` signs in to `app` through the provider's login form; the jar holds the session cookie. */
export async function signIn(app: TestApp, sub: string, jar = new CookieJar()): Promise<Browser> {
  const landed = await signInOverHttp(`${app.url}/auth/login`, sub, { jar });
  return { jar, landed };
}

/** The session cookie's Set-Cookie line, as the service sent it. */
export function sessionSetCookie(jar: CookieJar): string | undefined {
  return [...jar.seen].reverse().find((line) => line.startsWith('planfence_session=pfs_'));
}

/**
 * GraphQL as the browser sends it: the cookie; `csrf` the header; `origin` the Origin
 * header (default: the service's own).
 */
export async function cookieGql<T = Record<string, any>>(
  app: TestApp,
  jar: CookieJar,
  query: string,
  variables: Record<string, unknown> = {},
  options: { csrf?: string | null; origin?: string | null; headers?: Record<string, string> } = {},
): Promise<GqlResult<T> & { setCookie: string[] }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (jar.cookies.size) headers.cookie = jar.header();
  if (options.csrf) headers['x-planfence-csrf'] = options.csrf;
  const origin = options.origin === undefined ? app.url : options.origin;
  if (origin) headers.origin = origin;
  Object.assign(headers, options.headers ?? {});
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables }),
  });
  jar.take(response);
  const body = (await response.json()) as GqlResult<T>;
  return { ...body, status: response.status, setCookie: response.headers.getSetCookie() };
}

/** The browser's session CSRF token (mySession). */
export async function csrfOf(app: TestApp, jar: CookieJar): Promise<string> {
  const result = await cookieGql<{ mySession: { csrfToken: string } | null }>(
    app,
    jar,
    '{ mySession { csrfToken } }',
  );
  const token = result.data?.mySession?.csrfToken;
  if (!token) throw new Error(`no session: ${JSON.stringify(result)}`);
  return token;
}
