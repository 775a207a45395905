/**
 * R44: the API and POST /mcp take, as a bearer token, an access token of an issuer
 * configured with `accessTokens: true`: a JWT addressed to the service's resource URL (RFC
 * 8707), verified as R25 verifies an exchange's token and mapped by the issuer's rules. The
 * issuer is a real OpenID provider (oidc-provider: client credentials with resource
 * indicators, JWT access tokens). And the discovery document and JWKS of an issuer are
 * fetched once for many concurrent exchanges.
 */
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { OidcService } from '../src/identity/oidc.service.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { connectMcp } from './support/mcp.js';
import { serviceClient, startProvider, type StartedProvider } from './support/oidc-provider.js';
import { World } from './support/world.js';

const READS = ['get_plan', 'list_environments', 'wait_for_decision'];
const AGENT_TOOLS = ['acquire_lease', 'release_lease', 'renew_lease', 'submit_plan'];

let provider: StartedProvider;
let app: TestApp;
let world: World;

const AGENT_CLIENT = { clientId: 'deploy-agent', clientSecret: 'agent-secret-0123456789' };
const ADMIN_CLIENT = { clientId: 'admin-bot', clientSecret: 'admin-secret-0123456789' };
const UNMAPPED_CLIENT = { clientId: 'stranger', clientSecret: 'stranger-secret-0123456789' };
const REVOKED_CLIENT = { clientId: 'old-agent', clientSecret: 'old-agent-secret-0123456789' };

beforeAll(async () => {
  provider = await startProvider({
    clients: [
      serviceClient(AGENT_CLIENT.clientId, AGENT_CLIENT.clientSecret),
      serviceClient(ADMIN_CLIENT.clientId, ADMIN_CLIENT.clientSecret),
      serviceClient(UNMAPPED_CLIENT.clientId, UNMAPPED_CLIENT.clientSecret),
      serviceClient(REVOKED_CLIENT.clientId, REVOKED_CLIENT.clientSecret),
    ],
  });
  const dir = scratchDir();
  const path = join(dir.path, 'oidc.json');
  writeFileSync(
    path,
    JSON.stringify({
      issuers: [
        {
          issuer: provider.issuer,
          audience: 'planfence',
          accessTokens: true,
          rules: [
            {
              claims: { client_id: AGENT_CLIENT.clientId },
              principal: 'oauth:{client_id}',
              role: 'AGENT',
              environments: ['staging-*'],
            },
            {
              claims: { client_id: REVOKED_CLIENT.clientId },
              principal: 'oauth:{client_id}',
              role: 'AGENT',
            },
            {
              claims: { client_id: ADMIN_CLIENT.clientId },
              principal: 'oauth:{client_id}',
              role: 'ADMIN',
            },
          ],
        },
      ],
    }),
  );
  app = await startApp({ PLANFENCE_OIDC_CONFIG: path });
  world = new World(app);
  await world.createEnvironment('staging-web', 'MONOTONIC');
});

afterAll(async () => {
  await app?.close();
  await provider?.close();
});

/** A client-credentials access token for `client`, with `resource` (default: the MCP URL). */
function accessToken(
  client: { clientId: string; clientSecret: string },
  resource = `${app.url}/mcp`,
): Promise<string> {
  return provider.clientCredentialsToken({ ...client, resource, scope: 'api' });
}

async function postMcp(token: string | null): Promise<Response> {
  return fetch(`${app.url}/mcp`, {
    method: 'POST',
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
}

describe('an access token of the organisation provider', () => {
  // proves: R44
  test('POST /mcp with a client-credentials token for the MCP URL lists the AGENT tools; the agent works under its rule', async () => {
    const token = await accessToken(AGENT_CLIENT);
    // A JWT access token (RFC 9068), addressed to the MCP URL.
    const [header, payload] = token
      .split('.')
      .slice(0, 2)
      .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
    expect(header.typ).toBe('at+jwt');
    expect(payload.aud).toBe(`${app.url}/mcp`);

    const agent = await connectMcp(app.url, token, 'http');
    try {
      expect(await agent.tools()).toEqual([...AGENT_TOOLS, ...READS].sort());
      // The rule's environments hold: staging-web only.
      const listed = await agent.ok('list_environments', {});
      expect(listed.environments.map((e: { name: string }) => e.name)).toEqual(['staging-web']);
      const lease = await agent.ok('acquire_lease', { environment: 'staging-web' });
      expect(lease).toMatchObject({ holder: `oauth:${AGENT_CLIENT.clientId}`, generation: 1 });
    } finally {
      await agent.close();
    }
    // The API takes the same token: a token for the service URL too.
    const whoami = await world.gql<{ whoami: { name: string; role: string } }>(
      await accessToken(AGENT_CLIENT, app.url),
      '{ whoami { name role } }',
    );
    expect(whoami.data?.whoami).toEqual({ name: `oauth:${AGENT_CLIENT.clientId}`, role: 'AGENT' });
  });

  // proves: R44
  test('a token for another audience, a tampered one, or one no rule maps: 401 with where to get a token', async () => {
    const metadata = `${app.url}/.well-known/oauth-protected-resource`;
    const other = await accessToken(AGENT_CLIENT, 'https://other-service.example.com/mcp');
    const good = await accessToken(AGENT_CLIENT);
    const [h, p, signature] = good.split('.');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const tampered = [
      h,
      Buffer.from(JSON.stringify({ ...claims, client_id: ADMIN_CLIENT.clientId })).toString(
        'base64url',
      ),
      signature,
    ].join('.');
    const unmapped = await accessToken(UNMAPPED_CLIENT);
    for (const token of [other, tampered, unmapped]) {
      const response = await postMcp(token);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${metadata}", error="invalid_token"`,
      );
      expect(((await response.json()) as { error: { code: number } }).error.code).toBe(-32001);
    }
    // The API refuses them too.
    const refused = await world.gql(other, '{ whoami { name } }');
    expect(refused.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  // proves: R44
  test('the RFC 9728 document lists the provider as an authorization server; no token: 401 naming it', async () => {
    const response = await postMcp(null);
    expect(response.status).toBe(401);
    const challenge = response.headers.get('www-authenticate')!;
    const where = /resource_metadata="([^"]+)"/.exec(challenge)![1];
    const document = (await (await fetch(where)).json()) as Record<string, unknown>;
    expect(document).toEqual({
      resource: `${app.url}/mcp`,
      resource_name: 'planfence',
      bearer_methods_supported: ['header'],
      authorization_servers: [provider.issuer],
    });
  });

  // proves: R44
  test('revoking the principal an access token maps to stops that token at once', async () => {
    const token = await accessToken(REVOKED_CLIENT);
    expect((await postMcp(token)).status).toBe(200);
    const name = `oauth:${REVOKED_CLIENT.clientId}`;
    const revoked = await world.gql(
      world.admin,
      'mutation($name: String!) { revokeToken(name: $name) { name } }',
      { name },
    );
    expect(revoked.errors).toBeUndefined();
    expect((await postMcp(token)).status).toBe(401);
    // And a new token for the same principal is refused too: revocation is final for the name.
    expect((await postMcp(await accessToken(REVOKED_CLIENT))).status).toBe(401);
  });

  // proves: R44
  test('an access token that maps to ADMIN is still refused on MCP (R29)', async () => {
    const response = await postMcp(await accessToken(ADMIN_CLIENT));
    expect(response.status).toBe(403);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain(
      'ADMIN tokens are refused on MCP',
    );
  });
});

/** An issuer on loopback that counts its discovery and JWKS fetches. */
async function countingIssuer() {
  const pair = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const fetches = { discovery: 0, jwks: 0 };
  let url = '';
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') {
      fetches.discovery++;
      // Slow enough that every exchange arrives while the first fetch is under way.
      setTimeout(() => res.end(JSON.stringify({ issuer: url, jwks_uri: `${url}/jwks` })), 200);
    } else if (req.url === '/jwks') {
      fetches.jwks++;
      setTimeout(() => res.end(JSON.stringify({ keys: [jwk] })), 100);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    fetches,
    sign: (jti: string, subject: string) =>
      new SignJWT({ repository: 'org/app' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(url)
        .setAudience('planfence')
        .setSubject(subject)
        .setJti(jti)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(pair.privateKey),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

test('600 concurrent exchanges from 20 addresses fetch the discovery document and the JWKS once', async () => {
  const issuer = await countingIssuer();
  const dir = scratchDir();
  const path = join(dir.path, 'counting.json');
  writeFileSync(
    path,
    JSON.stringify({
      issuers: [
        {
          issuer: issuer.url,
          audience: 'planfence',
          rules: [
            {
              claims: { repository: 'org/app' },
              principal: 'ci:{sub}',
              role: 'AGENT',
            },
          ],
        },
      ],
    }),
  );
  const counted = await startApp({ PLANFENCE_OIDC_CONFIG: path });
  try {
    const oidc = counted.get(OidcService);
    const tokens = await Promise.all(
      Array.from({ length: 600 }, (_, i) => issuer.sign(`j${i}`, `job-${i}`)),
    );
    const outcomes = await Promise.all(
      tokens.map((token, i) =>
        oidc.exchange(token, `10.0.0.${i % 20}`).then(
          () => 'OK',
          (error: { code?: string }) => error.code ?? 'ERROR',
        ),
      ),
    );
    expect(outcomes.filter((o) => o === 'OK').length).toBe(600);
    expect(issuer.fetches).toEqual({ discovery: 1, jwks: 1 });
  } finally {
    await counted.close();
    await issuer.close();
  }
}, 120_000);
