/**
 * A real OpenID Connect provider for tests: `oidc-provider` (v9) on 127.0.0.1 on a free
 * port. It plays the organisation's Okta/Entra/Keycloak: people sign in on its own login
 * form (the library's development interactions: any password, the login is an account's
 * `sub` in the table given), and machines get client_credentials tokens.
 *
 * - the console client: authorization code + PKCE (S256), confidential or public, its
 *   redirect URIs given by the caller (`registerClient` adds or replaces one at any time,
 *   e.g. once the service's port is known);
 * - a public CLI client (`cliClient`): native, loopback redirect http://127.0.0.1:{any port}/
 *   (RFC 8252), and the device flow (RFC 8628);
 * - a client_credentials client (`serviceClient`): with `resource=<url>` the access token is
 *   a JWT whose `aud` is that resource (RFC 8707);
 * - claims `email`, `name` and `groups` (scopes email, profile, groups) from the account
 *   table, also in the ID token. Consent is not asked (first-party clients).
 *
 * The login form is a plain HTML form: headless Chromium fills it (`login` and `password`
 * fields, a "Sign-in" button), and `signInOverHttp` submits it with a cookie jar.
 */
/* eslint-disable @typescript-eslint/require-await -- oidc-provider calls these as promises */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
// oidc-provider ships no type declarations; the few calls made here are typed locally.
// eslint-disable-next-line @typescript-eslint/ban-ts-comment
// @ts-ignore
import Provider from 'oidc-provider';

/** One person of the provider's directory: signs in with `sub` as the login (any password). */
export interface ProviderAccount {
  /** The `sub` claim, and what the person types as the login (the provider names accounts by it). */
  sub: string;
  email?: string;
  name?: string;
  groups?: string[];
}

/** Client metadata as oidc-provider takes it (snake_case, RFC 7591). */
export type ClientMetadata = Record<string, unknown> & { client_id: string };

export interface StartedProvider {
  /** e.g. http://127.0.0.1:40123 (no trailing slash) */
  issuer: string;
  /** Adds a client, or replaces the one with the same client_id. */
  registerClient(metadata: ClientMetadata): void;
  /** Adds or replaces an account. */
  setAccount(account: ProviderAccount): void;
  /** A client_credentials access token (a JWT with aud = `resource` when given). */
  clientCredentialsToken(options: {
    clientId: string;
    clientSecret: string;
    resource?: string;
    scope?: string;
  }): Promise<string>;
  close(): Promise<void>;
}

/** The console's client: authorization code + PKCE; `clientSecret` absent → a public client. */
export function consoleClient(options: {
  clientId: string;
  redirectUris: string[];
  clientSecret?: string;
}): ClientMetadata {
  return {
    client_id: options.clientId,
    ...(options.clientSecret
      ? { client_secret: options.clientSecret, token_endpoint_auth_method: 'client_secret_basic' }
      : { token_endpoint_auth_method: 'none' }),
    redirect_uris: options.redirectUris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    application_type: 'web',
  };
}

/** A public native client for a command line: any loopback port (RFC 8252), device flow. */
export function cliClient(clientId: string): ClientMetadata {
  return {
    client_id: clientId,
    token_endpoint_auth_method: 'none',
    application_type: 'native',
    redirect_uris: ['http://127.0.0.1/callback', 'http://127.0.0.1/'],
    grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
    response_types: ['code'],
  };
}

/** A machine client: client_credentials. */
export function serviceClient(clientId: string, clientSecret: string): ClientMetadata {
  return {
    client_id: clientId,
    client_secret: clientSecret,
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
  };
}

/** Starts the provider. Clients and accounts can be added later (registerClient, setAccount). */
export async function startProvider(
  options: { accounts?: ProviderAccount[]; clients?: ClientMetadata[] } = {},
): Promise<StartedProvider> {
  const accounts = new Map<string, ProviderAccount>();
  for (const account of options.accounts ?? []) accounts.set(account.sub, account);
  const clients = new Map<string, ClientMetadata>();
  for (const client of options.clients ?? []) clients.set(client.client_id, client);

  // The issuer names its port, so the port comes first.
  let handler: ((req: any, res: any) => void) | null = null;
  const server: Server = createServer((req, res) => {
    if (handler) handler(req, res);
    else res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const stores = new Map<string, Map<string, { payload: any; expiresAt?: number }>>();
  const store = (model: string) => {
    let found = stores.get(model);
    if (!found) stores.set(model, (found = new Map()));
    return found;
  };
  const live = (entry: { payload: any; expiresAt?: number } | undefined) =>
    entry && (!entry.expiresAt || entry.expiresAt > Date.now()) ? entry.payload : undefined;

  /** A small in-memory adapter; clients come from the caller's table (replaceable at any time). */
  class Adapter {
    constructor(private readonly model: string) {}
    async upsert(id: string, payload: any, expiresIn?: number) {
      store(this.model).set(id, {
        payload,
        expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : undefined,
      });
    }
    async find(id: string) {
      if (this.model === 'Client') return clients.get(id);
      return live(store(this.model).get(id));
    }
    async findByUserCode(userCode: string) {
      for (const entry of store(this.model).values())
        if (entry.payload.userCode === userCode) return live(entry);
      return undefined;
    }
    async findByUid(uid: string) {
      for (const entry of store(this.model).values())
        if (entry.payload.uid === uid) return live(entry);
      return undefined;
    }
    async consume(id: string) {
      const entry = store(this.model).get(id);
      if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store(this.model).delete(id);
    }
    async revokeByGrantId(grantId: string) {
      for (const [id, entry] of store(this.model))
        if (entry.payload.grantId === grantId) store(this.model).delete(id);
    }
  }

  const provider = new Provider(issuer, {
    adapter: Adapter,
    clients: [],
    cookies: { keys: ['planfence-test-provider-cookie-key'] },
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name'],
      groups: ['groups'],
    },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups', 'api'],
    // email, name and groups travel in the ID token too, as the sign-in reads them there.
    conformIdTokenClaims: false,
    async findAccount(_ctx: unknown, id: string) {
      const account = accounts.get(id);
      if (!account) return undefined;
      const sub = account.sub;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            ...(account.email ? { email: account.email, email_verified: true } : {}),
            ...(account.name ? { name: account.name } : {}),
            ...(account.groups ? { groups: account.groups } : {}),
          };
        },
      };
    },
    // First-party clients: the person is not asked to consent.
    async loadExistingGrant(ctx: any) {
      const grantId =
        ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile groups offline_access');
      grant.addOIDCClaims(['email', 'email_verified', 'name', 'groups']);
      await grant.save();
      return grant;
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      deviceFlow: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx: unknown, _client: unknown, oneOf?: string) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({
          scope: 'api',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    ttl: {
      AccessToken: 600,
      ClientCredentials: 600,
      AuthorizationCode: 60,
      DeviceCode: 600,
      IdToken: 600,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
    },
  });
  // Quiet in test output: failures show up in the tests' own assertions.
  provider.on('server_error', (_ctx: unknown, error: Error) => {
    console.error('oidc-provider server_error', error);
  });
  handler = provider.callback();

  return {
    issuer,
    registerClient(metadata) {
      clients.set(metadata.client_id, metadata);
    },
    setAccount(account) {
      accounts.set(account.sub, account);
    },
    async clientCredentialsToken({ clientId, clientSecret, resource, scope }) {
      const body = new URLSearchParams({ grant_type: 'client_credentials' });
      if (resource) body.set('resource', resource);
      if (scope) body.set('scope', scope);
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`,
        },
        body,
      });
      const json = (await response.json()) as { access_token?: string; error?: string };
      if (!response.ok || !json.access_token)
        throw new Error(`client_credentials failed: ${response.status} ${JSON.stringify(json)}`);
      return json.access_token;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A cookie jar by cookie name (the tests' hosts are all 127.0.0.1; names do not collide). */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  /** Raw Set-Cookie lines seen, in order (for assertions on attributes). */
  readonly seen: string[] = [];
  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      this.seen.push(line);
      const [pair, ...attributes] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      const expired = attributes.some(
        (a) =>
          /^\s*max-age\s*=\s*0\s*$/i.test(a) ||
          (/^\s*expires\s*=/i.test(a) && Date.parse(a.split('=')[1]) < Date.now()),
      );
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

export interface BrowseResult {
  /** The last URL requested. */
  url: string;
  status: number;
  body: string;
  /** Where the last response redirected to, when it did and browsing stopped there. */
  location: string | null;
}

/**
 * Follows a sign-in as a browser would, over plain HTTP with `jar`: redirects are followed,
 * and the provider's login form is submitted with `login` (any password). Stops at the first
 * response that is not a redirect, or before requesting a URL for which `stopAt` is true
 * (then `location` is that URL). `login` is the account's `sub`.
 */
export async function signInOverHttp(
  start: string,
  login: string,
  options: {
    jar?: CookieJar;
    stopAt?: (url: string) => boolean;
    headers?: Record<string, string>;
  } = {},
): Promise<BrowseResult> {
  const jar = options.jar ?? new CookieJar();
  let url = start;
  let method = 'GET';
  let body: URLSearchParams | undefined;
  for (let hop = 0; hop < 20; hop++) {
    if (options.stopAt?.(url) && hop > 0) return { url, status: 0, body: '', location: url };
    const response = await fetch(url, {
      method,
      redirect: 'manual',
      headers: {
        ...(options.headers ?? {}),
        ...(jar.cookies.size ? { cookie: jar.header() } : {}),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body,
    });
    jar.take(response);
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      url = new URL(location, url).href;
      method = 'GET';
      body = undefined;
      continue;
    }
    const text = await response.text();
    const form =
      /<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>[\s\S]*?name="prompt" value="(login|consent)"/.exec(
        text,
      );
    if (response.status === 200 && form) {
      url = new URL(form[1].replace(/&amp;/g, '&'), url).href;
      method = 'POST';
      body =
        form[2] === 'login'
          ? new URLSearchParams({ prompt: 'login', login, password: 'any' })
          : new URLSearchParams({ prompt: 'consent' });
      continue;
    }
    return { url, status: response.status, body: text, location: null };
  }
  throw new Error(`sign-in did not finish after 20 hops (last ${url})`);
}
