/**
 * The test OpenID provider itself (test/support/oidc-provider.ts): a relying party built
 * with openid-client signs a person in through its login form over HTTP (authorization
 * code + PKCE S256, state, nonce), reads the ID token's claims; a machine client gets a
 * JWT access token for a resource (RFC 8707).
 */
import * as client from 'openid-client';
import { decodeJwt } from 'jose';
import {
  cliClient,
  consoleClient,
  serviceClient,
  signInOverHttp,
  startProvider,
  type StartedProvider,
} from './support/oidc-provider.js';

describe('test OpenID provider', () => {
  let provider: StartedProvider;
  beforeAll(async () => {
    provider = await startProvider({
      accounts: [
        { sub: 'u-alice', email: 'alice@example.com', name: 'Alice A', groups: ['reviewers'] },
      ],
      clients: [
        consoleClient({
          clientId: 'console',
          clientSecret: 's3cret',
          redirectUris: ['http://127.0.0.1:1/cb'],
        }),
        cliClient('cli'),
        serviceClient('machine', 'm-secret'),
      ],
    });
  });
  afterAll(() => provider.close());

  async function codeFlow(config: client.Configuration, redirectUri: string) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'openid email profile groups',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    const landed = await signInOverHttp(url.href, 'u-alice', {
      stopAt: (u) => u.startsWith(redirectUri.replace(/:\d+/, '')) || u.startsWith(redirectUri),
    });
    expect(landed.location).toContain('code=');
    const tokens = await client.authorizationCodeGrant(config, new URL(landed.location!), {
      pkceCodeVerifier: verifier,
      expectedState: state,
      expectedNonce: nonce,
    });
    return tokens.claims()!;
  }

  it('signs a person in on a confidential client with PKCE; the ID token carries email, name, groups', async () => {
    const config = await client.discovery(
      new URL(provider.issuer),
      'console',
      's3cret',
      undefined,
      { execute: [client.allowInsecureRequests] },
    );
    const claims = await codeFlow(config, 'http://127.0.0.1:1/cb');
    expect(claims).toMatchObject({
      iss: provider.issuer,
      sub: 'u-alice',
      aud: 'console',
      email: 'alice@example.com',
      name: 'Alice A',
      groups: ['reviewers'],
    });
  });

  it('the CLI client redirects to any loopback port (RFC 8252)', async () => {
    const config = await client.discovery(
      new URL(provider.issuer),
      'cli',
      undefined,
      client.None(),
      {
        execute: [client.allowInsecureRequests],
      },
    );
    const claims = await codeFlow(config, 'http://127.0.0.1:54321/callback');
    expect(claims.sub).toBe('u-alice');
  });

  it('a client_credentials token for a resource is a JWT with that aud', async () => {
    const token = await provider.clientCredentialsToken({
      clientId: 'machine',
      clientSecret: 'm-secret',
      resource: 'http://127.0.0.1:9/graphql',
    });
    const payload = decodeJwt(token);
    expect(payload).toMatchObject({
      iss: provider.issuer,
      aud: 'http://127.0.0.1:9/graphql',
      client_id: 'machine',
    });
  });
});
