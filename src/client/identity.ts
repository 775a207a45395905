import { type ClientOptions, PlanfenceClient } from './client.js';
import { TransportError } from './errors.js';

/** What an exchange gave: the planfence token and when it stops working. */
export interface ExchangedToken {
  token: string;
  principal: { name: string; role: string; expiresAt: string | null };
}

/** Exchanged again this long before the planfence token expires. */
const REFRESH_BEFORE_MS = 60_000;

const EXCHANGE = `mutation($token: String!) {
  exchangeOidcToken(token: $token) { token principal { name role expiresAt } }
}`;

/**
 * Exchanges an OIDC JWT for a planfence token (R25) on the service at `url`. Throws the
 * service's PlanfenceError (UNAUTHENTICATED: the JWT was refused; FORBIDDEN: no rule maps it).
 */
export async function exchangeOidcToken(
  options: Omit<ClientOptions, 'token'>,
  jwt: string,
): Promise<ExchangedToken> {
  const client = new PlanfenceClient({ ...options, token: 'none' });
  const data = await client.request<{ exchangeOidcToken: ExchangedToken }>(EXCHANGE, {
    token: jwt,
  });
  return data.exchangeOidcToken;
}

/**
 * A client that authenticates with OIDC: `getToken` returns a fresh JWT from the CI
 * system (each call a new one: a JWT is exchanged once). The first exchange happens here;
 * a request made less than a minute before the planfence token expires exchanges a new
 * JWT first, so a long job keeps working past the one-hour life of each token.
 */
export async function fromOidcToken(
  options: Omit<ClientOptions, 'token'>,
  getToken: () => Promise<string>,
): Promise<PlanfenceClient> {
  const transport = options.fetch ?? fetch;
  let current = await exchangeOidcToken(options, await getToken());
  let renewing: Promise<ExchangedToken> | null = null;
  const fresh = async (): Promise<string> => {
    const expiresAt = current.principal.expiresAt ? Date.parse(current.principal.expiresAt) : null;
    if (expiresAt !== null && expiresAt - Date.now() < REFRESH_BEFORE_MS) {
      renewing ??= getToken()
        .then((jwt) => exchangeOidcToken(options, jwt))
        .finally(() => (renewing = null));
      current = await renewing;
    }
    return current.token;
  };
  const authenticated: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${await fresh()}`);
    return transport(input, { ...init, headers });
  };
  return new PlanfenceClient({ ...options, token: current.token, fetch: authenticated });
}

/**
 * A JWT from GitHub Actions for `audience` (the job needs `permissions: id-token: write`):
 * reads ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN.
 */
export async function githubActionsIdToken(
  audience: string,
  env: Record<string, string | undefined> = process.env,
): Promise<string> {
  const url = env.ACTIONS_ID_TOKEN_REQUEST_URL;
  const bearer = env.ACTIONS_ID_TOKEN_REQUEST_TOKEN;
  if (!url || !bearer) {
    throw new TransportError(
      'no GitHub Actions OIDC token available: the job needs "permissions: id-token: write"',
    );
  }
  const request = new URL(url);
  request.searchParams.set('audience', audience);
  const response = await fetch(request, { headers: { authorization: `bearer ${bearer}` } });
  if (!response.ok) {
    throw new TransportError(
      `GitHub refused the OIDC token request (HTTP ${response.status})`,
      response.status,
    );
  }
  const body = (await response.json()) as { value?: string };
  if (!body.value) throw new TransportError('GitHub answered without an OIDC token');
  return body.value;
}

/** `fromOidcToken` with the GitHub Actions job's token for `audience`. */
export function fromGitHubActions(
  options: Omit<ClientOptions, 'token'> & { audience: string },
): Promise<PlanfenceClient> {
  const { audience, ...rest } = options;
  return fromOidcToken(rest, () => githubActionsIdToken(audience));
}
