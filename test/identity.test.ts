/**
 * OIDC token exchange (DESIGN §12, R25) against a real local issuer: an HTTP server on
 * loopback serving a discovery document and a JWKS, tokens signed with real keys. Every
 * forged, replayed, expired or misaddressed token is UNAUTHENTICATED; a token no rule
 * maps is FORBIDDEN; a mapped one becomes a short-lived planfence token with the rule's
 * role, groups and environments.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { Database } from '../src/database/database.js';
import {
  ADMIN_TOKEN,
  codeOf,
  ok,
  scratchDir,
  startApp,
  TEST_DATABASE,
  type TestApp,
} from './support/app.js';
import { World } from './support/world.js';
import { exchangeOidcToken, fromOidcToken } from '../src/client/identity.js';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

/** A minimal OIDC issuer: discovery at /.well-known/openid-configuration, keys at /jwks. */
class LocalIssuer {
  keys: { kid: string; pair: KeyPair }[] = [];
  jwksFetches = 0;
  private server: Server | null = null;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ issuer: this.url, jwks_uri: `${this.url}/jwks` }));
      } else if (req.url === '/jwks') {
        this.jwksFetches++;
        void this.jwks().then((body) => {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(body));
        });
      } else if (req.url === '/hang') {
        // Accepts the request and never answers: a JWKS endpoint that is down.
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async addKey(kid: string): Promise<KeyPair> {
    const pair = await generateKeyPair('RS256', { extractable: true });
    this.keys.push({ kid, pair });
    return pair;
  }

  private async jwks(): Promise<{ keys: JWK[] }> {
    return {
      keys: await Promise.all(
        this.keys.map(async ({ kid, pair }) => ({
          ...(await exportJWK(pair.publicKey)),
          kid,
          alg: 'RS256',
          use: 'sig',
        })),
      ),
    };
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

const issuer = new LocalIssuer();
const dir = scratchDir();
let app: TestApp;
let world: World;
let jti = 0;
const AUDIENCE = 'planfence';
const OWNER_ID = '1342004';

/** The claims a GitHub Actions job's token carries, for the service's current time. */
async function claims(extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const now = Math.floor((await app.clock.now()) / 1000);
  return {
    iss: issuer.url,
    aud: AUDIENCE,
    sub: 'repo:octo/app:environment:staging-eu',
    jti: `jti-${process.pid}-${++jti}`,
    iat: now,
    nbf: now - 5,
    exp: now + 600,
    repository: 'octo/app',
    repository_owner_id: OWNER_ID,
    ref: 'refs/heads/main',
    environment: 'staging-eu',
    ...extra,
  };
}

async function sign(
  payload: Record<string, unknown>,
  kid = 'key-1',
  key: KeyPair['privateKey'] | Uint8Array = issuer.keys.find((k) => k.kid === kid)!.pair.privateKey,
  alg = 'RS256',
): Promise<string> {
  const { iss, aud, sub, jti: id, exp, nbf, iat, ...rest } = payload;
  let jwt = new SignJWT(rest).setProtectedHeader({ alg, kid });
  if (iss !== undefined) jwt = jwt.setIssuer(iss as string);
  if (aud !== undefined) jwt = jwt.setAudience(aud as string | string[]);
  if (sub !== undefined) jwt = jwt.setSubject(sub as string);
  if (id !== undefined) jwt = jwt.setJti(id as string);
  if (exp !== undefined) jwt = jwt.setExpirationTime(exp as number);
  if (nbf !== undefined) jwt = jwt.setNotBefore(nbf as number);
  if (iat !== undefined) jwt = jwt.setIssuedAt(iat as number);
  return jwt.sign(key);
}

const EXCHANGE = `mutation($token: String!) {
  exchangeOidcToken(token: $token) { token principal { name role groups environments expiresAt } }
}`;

function exchange(token: string) {
  return app.gql<{
    exchangeOidcToken: {
      token: string;
      principal: {
        name: string;
        role: string;
        groups: string[];
        environments: string[] | null;
        expiresAt: string;
      };
    };
  }>(null, EXCHANGE, { token });
}

function writeConfig(name: string, config: unknown): string {
  const path = join(dir.path, name);
  writeFileSync(path, typeof config === 'string' ? config : JSON.stringify(config));
  return path;
}

beforeAll(async () => {
  await issuer.start();
  await issuer.addKey('key-1');
  const path = writeConfig('oidc.json', {
    issuers: [
      {
        issuer: issuer.url,
        audience: AUDIENCE,
        algorithms: ['RS256'],
        rules: [
          {
            claims: { repository_owner_id: OWNER_ID, ref: 'refs/heads/*' },
            principal: 'gha:{repository}:{environment}',
            role: 'AGENT',
            groups: ['ci'],
            environments: ['staging-*'],
          },
          {
            claims: { repository_owner_id: OWNER_ID, ref: 'refs/tags/v*' },
            principal: 'release:{repository}',
            role: 'DEPLOYER',
          },
          {
            claims: { repository_owner_id: 'ops-owner' },
            principal: 'ops:{repository}',
            role: 'ADMIN',
            environments: ['staging-*'],
          },
        ],
      },
      {
        issuer: `${issuer.url}/down`,
        audience: AUDIENCE,
        algorithms: ['RS256'],
        jwksUri: `${issuer.url}/hang`,
        rules: [{ claims: { sub: '*' }, principal: 'down:{sub}', role: 'VIEWER' }],
      },
    ],
  });
  app = await startApp({
    PLANFENCE_OIDC_CONFIG: path,
    PLANFENCE_OIDC_JWKS_COOLDOWN_SECONDS: '0',
    PLANFENCE_OIDC_JWKS_TIMEOUT_MS: '300',
    PLANFENCE_WS_RECHECK_SECONDS: '3600',
  });
  world = new World(app);
  for (const name of ['prod', 'staging-eu'])
    await world.createEnvironment(name, 'MONOTONIC', false);
});
afterAll(async () => {
  await app.close();
  await issuer.stop();
  dir.cleanup();
});

describe('a valid token mapped by a rule', () => {
  // proves: R25, R26, R27
  test('becomes a short-lived token with the rule’s role, groups and environments', async () => {
    const payload = await claims();
    const exchanged = ok(await exchange(await sign(payload))).exchangeOidcToken;
    expect(exchanged.principal).toEqual({
      name: 'gha:octo/app:staging-eu',
      role: 'AGENT',
      groups: ['ci'],
      environments: ['staging-*'],
      // Never beyond the JWT's own expiry.
      expiresAt: new Date((payload.exp as number) * 1000).toISOString(),
    });
    const token = exchanged.token;
    expect(ok(await app.gql(token, '{ whoami { name role } }')).whoami).toEqual({
      name: 'gha:octo/app:staging-eu',
      role: 'AGENT',
    });
    const generation = await world.acquire(token, 'staging-eu', 60);
    const plan = await world.submitOk(token, 'staging-eu', generation, 'from CI');
    expect(plan.id).toMatch(/^staging-eu@/);
    const refused = await world.acquireRaw(token, 'prod', 60);
    expect(codeOf(refused)).toBe('FORBIDDEN');
    expect(await world.auditEvents('prod')).toContainEqual(
      expect.objectContaining({
        actor: 'gha:octo/app:staging-eu',
        outcome: 'REJECTED',
        code: 'FORBIDDEN',
      }),
    );
    // The exchange is on record: issuer, subject, principal and rule.
    const records = await app.app
      .get(Database)
      .read((m) =>
        m.query(
          "SELECT issuer, subject, principal, rule_index FROM oidc_exchanges WHERE outcome = 'ACCEPTED'",
        ),
      );
    expect(records).toContainEqual({
      issuer: issuer.url,
      subject: 'repo:octo/app:environment:staging-eu',
      principal: 'gha:octo/app:staging-eu',
      rule_index: 0,
    });
  });

  // proves: R25
  test('the same jti again is UNAUTHENTICATED', async () => {
    const token = await sign(await claims());
    ok(await exchange(token));
    const again = await exchange(token);
    expect(codeOf(again)).toBe('UNAUTHENTICATED');
    expect(again.errors![0].message).toContain('already exchanged');
  });

  // proves: R25
  test('lives at most an hour, and stops at its instant', async () => {
    const payload = await claims({
      exp: Math.floor((await app.clock.now()) / 1000) + 7200,
      environment: 'one-hour',
    });
    const exchanged = ok(await exchange(await sign(payload))).exchangeOidcToken;
    expect(Date.parse(exchanged.principal.expiresAt)).toBe((await app.clock.now()) + 3600_000);
    app.clock.advance(3599_000);
    expect(codeOf(await app.gql(exchanged.token, '{ whoami { name } }'))).toBe('OK');
    app.clock.advance(1000);
    expect(codeOf(await app.gql(exchanged.token, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
  });

  // proves: R25
  test('the second rule maps a tag build; the first matching rule wins', async () => {
    const exchanged = ok(
      await exchange(await sign(await claims({ ref: 'refs/tags/v1.2.0' }))),
    ).exchangeOidcToken;
    expect(exchanged.principal).toMatchObject({
      name: 'release:octo/app',
      role: 'DEPLOYER',
      groups: [],
      environments: null,
    });
  });

  test('a later exchange for the same principal replaces its token', async () => {
    const first = ok(
      await exchange(await sign(await claims({ environment: 'staging-us' }))),
    ).exchangeOidcToken;
    const second = ok(
      await exchange(await sign(await claims({ environment: 'staging-us' }))),
    ).exchangeOidcToken;
    expect(second.principal.name).toBe(first.principal.name);
    expect(codeOf(await app.gql(first.token, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
    expect(codeOf(await app.gql(second.token, '{ whoami { name } }'))).toBe('OK');
  });

  test('a rule granting ADMIN with environments gives an ADMIN that cannot touch tokens or principals', async () => {
    const exchanged = ok(
      await exchange(await sign(await claims({ repository_owner_id: 'ops-owner' }))),
    ).exchangeOidcToken;
    expect(exchanged.principal).toMatchObject({ role: 'ADMIN', environments: ['staging-*'] });
    for (const query of [
      'mutation { rotateToken(name: "admin") { token } }',
      'mutation { issueToken(name: "escaped", role: ADMIN) { token } }',
      '{ principals { name } }',
    ]) {
      expect(codeOf(await app.gql(exchanged.token, query))).toBe('FORBIDDEN');
    }
    expect(codeOf(await app.gql(ADMIN_TOKEN, '{ whoami { name } }'))).toBe('OK');
    const frozen = await app.gql(
      exchanged.token,
      'mutation { freezeEnvironment(environment: "staging-eu", reason: "ops") { name } }',
    );
    expect(codeOf(frozen)).toBe('OK');
    ok(
      await app.gql(
        ADMIN_TOKEN,
        'mutation { unfreezeEnvironment(environment: "staging-eu") { name } }',
      ),
    );
  });
});

// proves: R25
describe('a token that fails verification is UNAUTHENTICATED', () => {
  const cases: [string, () => Promise<string>][] = [
    [
      'expired',
      async () => sign(await claims({ exp: Math.floor((await app.clock.now()) / 1000) - 60 })),
    ],
    [
      'not yet valid',
      async () => sign(await claims({ nbf: Math.floor((await app.clock.now()) / 1000) + 600 })),
    ],
    ['from an unknown issuer', async () => sign(await claims({ iss: `${issuer.url}/evil` }))],
    ['for another audience', async () => sign(await claims({ aud: 'someone-else' }))],
    ['without an audience', async () => sign(await claims({ aud: undefined }))],
    ['for two audiences', async () => sign(await claims({ aud: [AUDIENCE, 'someone-else'] }))],
    ['without a jti', async () => sign(await claims({ jti: undefined }))],
    [
      'alg none',
      async () => {
        const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
        return `${part({ alg: 'none', typ: 'JWT' })}.${part(await claims())}.`;
      },
    ],
    [
      'HS256 signed with the public key',
      async () => {
        const pem = await exportSPKI(issuer.keys[0].pair.publicKey);
        return sign(await claims(), 'key-1', new TextEncoder().encode(pem), 'HS256');
      },
    ],
    [
      'signed with a key not in the JWKS',
      async () => {
        const stranger = await generateKeyPair('RS256');
        return sign(await claims(), 'stranger', stranger.privateKey);
      },
    ],
    [
      'signed with another key under a known kid',
      async () => {
        const stranger = await generateKeyPair('RS256');
        return sign(await claims(), 'key-1', stranger.privateKey);
      },
    ],
    [
      'with a tampered payload',
      async () => {
        const [header, , signature] = (await sign(await claims())).split('.');
        const forged = Buffer.from(
          JSON.stringify(await claims({ repository_owner_id: '1' })),
        ).toString('base64url');
        return `${header}.${forged}.${signature}`;
      },
    ],
    ['not a JWT at all', () => Promise.resolve('not-a-jwt')],
  ];
  /** Each refusal says why: the check that failed, not just any failure. */
  const REASONS: Record<string, string> = {
    expired: 'ERR_JWT_EXPIRED',
    'not yet valid': '"nbf" claim',
    'from an unknown issuer': 'not from a configured issuer',
    'for another audience': '"aud" claim value',
    'without an audience': 'missing required "aud"',
    'for two audiences': 'not 2 audiences',
    'without a jti': 'missing required "jti"',
    'alg none': 'ERR_JOSE_ALG_NOT_ALLOWED',
    'HS256 signed with the public key': 'ERR_JOSE_ALG_NOT_ALLOWED',
    'signed with a key not in the JWKS': 'ERR_JWKS_NO_MATCHING_KEY',
    'signed with another key under a known kid': 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
    'with a tampered payload': 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
    'not a JWT at all': 'not a JWT',
  };
  test.each(cases)('%s', async (_, make) => {
    const result = await exchange(await make());
    expect(codeOf(result)).toBe('UNAUTHENTICATED');
    expect(result.errors![0].message).toContain(REASONS[_]);
  });
});

// proves: R25
test('no matching rule is FORBIDDEN and names the claims that failed', async () => {
  const result = await exchange(
    // Longer than any port, so that the issuer's URL in the message never contains it.
    await sign(await claims({ repository_owner_id: '98765432', ref: 'refs/pull/1/merge' })),
  );
  expect(codeOf(result)).toBe('FORBIDDEN');
  expect(result.errors![0].message).toContain('rule 0: repository_owner_id, ref');
  expect(result.errors![0].message).toContain('rule 1: repository_owner_id, ref');
  expect(result.errors![0].message).not.toContain('98765432');
  expect(result.errors![0].message).not.toContain('refs/pull/1/merge');
});

// proves: R25
test('a rule whose template claim is missing does not match', async () => {
  const result = await exchange(await sign(await claims({ environment: undefined })));
  expect(codeOf(result)).toBe('FORBIDDEN');
  expect(result.errors![0].message).toContain('environment');
});

// proves: R25
test('the issuer rotates its keys: a token with the new kid is accepted after one refetch', async () => {
  await issuer.addKey('key-2');
  issuer.keys.shift();
  const before = issuer.jwksFetches;
  const result = await exchange(await sign(await claims({ environment: 'rotated' }), 'key-2'));
  expect(ok(result).exchangeOidcToken.principal.name).toBe('gha:octo/app:rotated');
  expect(issuer.jwksFetches).toBe(before + 1);
  // The old key is gone from the JWKS: tokens signed with it no longer verify.
  const old = await exchange(
    await sign(await claims(), 'key-2', (await generateKeyPair('RS256')).privateKey),
  );
  expect(codeOf(old)).toBe('UNAUTHENTICATED');
});

test('the JWKS endpoint down: UNAUTHENTICATED, no hang', async () => {
  const token = await sign(await claims({ iss: `${issuer.url}/down` }), 'key-2');
  const result = await exchange(token);
  expect(codeOf(result)).toBe('UNAUTHENTICATED');
  expect(result.errors![0].message).toContain('could not be fetched in time');
});

// proves: R26
test('an exchanged principal can be revoked by an ADMIN', async () => {
  const exchanged = ok(
    await exchange(await sign(await claims({ environment: 'revoked' }), 'key-2')),
  ).exchangeOidcToken;
  ok(
    await app.gql(ADMIN_TOKEN, 'mutation($name: String!) { revokeToken(name: $name) { name } }', {
      name: exchanged.principal.name,
    }),
  );
  expect(codeOf(await app.gql(exchanged.token, '{ whoami { name } }'))).toBe('UNAUTHENTICATED');
  // A revoked principal is not brought back by a new exchange.
  const again = await exchange(await sign(await claims({ environment: 'revoked' }), 'key-2'));
  expect(codeOf(again)).toBe('FORBIDDEN');
});

describe('PLANFENCE_OIDC_CONFIG is validated at start', () => {
  const valid = {
    issuer: 'https://token.actions.githubusercontent.com',
    audience: 'planfence',
    algorithms: ['RS256'],
    rules: [{ claims: { repository_owner_id: '1' }, principal: 'gha:{repository}', role: 'AGENT' }],
  };
  const load = (config: unknown) =>
    loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      PLANFENCE_OIDC_CONFIG: writeConfig('check.json', config),
    });

  test('a valid file loads', () => {
    expect(load({ issuers: [valid] }).identity.oidc?.issuers[0].rules[0].role).toBe('AGENT');
  });

  test.each([
    ['not JSON', '{ issuers: ', 'not valid JSON'],
    ['no issuers', { issuers: [] }, 'issuers must be a non-empty array'],
    ['two audiences', { issuers: [{ ...valid, audience: ['a', 'b'] }] }, 'exactly one audience'],
    ['HMAC', { issuers: [{ ...valid, algorithms: ['HS256'] }] }, '"HS256" is not allowed'],
    ['alg none', { issuers: [{ ...valid, algorithms: ['none'] }] }, '"none" is not allowed'],
    [
      'plain http',
      { issuers: [{ ...valid, issuer: 'http://example.com' }] },
      'must be an https URL',
    ],
    [
      'a rule without claims',
      { issuers: [{ ...valid, rules: [{ ...valid.rules[0], claims: {} }] }] },
      'at least one claim',
    ],
    [
      'an unknown role',
      { issuers: [{ ...valid, rules: [{ ...valid.rules[0], role: 'ROOT' }] }] },
      'role must be one of',
    ],
    [
      'a misspelt key',
      { issuers: [{ ...valid, rules: [{ ...valid.rules[0], claim: {} }] }] },
      'unknown key(s) claim',
    ],
    [
      'a bad pattern',
      { issuers: [{ ...valid, rules: [{ ...valid.rules[0], environments: ['Prod'] }] }] },
      '"Prod" is not a name pattern',
    ],
  ])('%s stops the start', (_, config, problem) => {
    expect(() => load(config)).toThrow(ConfigError);
    expect(() => load(config)).toThrow(problem);
  });

  test('a missing file stops the start', () => {
    expect(() =>
      loadConfig({
        DATABASE_URL: 'sqlite::memory:',
        PLANFENCE_OIDC_CONFIG: join(dir.path, 'missing.json'),
      }),
    ).toThrow(/PLANFENCE_OIDC_CONFIG cannot be read/);
  });
});

describe('the client', () => {
  test('fromOidcToken exchanges a fresh JWT, and exchanges again once its token is near expiry', async () => {
    let jwts = 0;
    const getToken = async () => {
      jwts++;
      return sign(await claims({ environment: 'client' }), 'key-2');
    };
    const client = await fromOidcToken({ url: app.url }, getToken);
    expect(jwts).toBe(1);
    expect((await client.whoami()).name).toBe('gha:octo/app:client');
    // The service clock of the tests stands before this machine's: to the client the
    // token is already near its expiry, so each request exchanges a new JWT first.
    expect((await client.whoami()).role).toBe('AGENT');
    expect(jwts).toBeGreaterThan(1);
  });

  test('exchangeOidcToken throws the service’s refusal', async () => {
    await expect(
      exchangeOidcToken(
        { url: app.url },
        await sign(await claims({ repository_owner_id: '1' }), 'key-2'),
      ),
    ).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });
});

// The command line is a client of the service's HTTP API, the same whatever database the
// service runs on: it is proven once, in the SQLite project.
(TEST_DATABASE === 'sqlite' ? describe : describe.skip)('planfence login', () => {
  const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
  const login = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env = { ...process.env, PLANFENCE_URL: app.url };
      execFile(process.execPath, [BIN, 'login', ...args], { env }, (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      });
    });

  test('--oidc-token-file prints a working token; a refused JWT is exit code 3', async () => {
    const file = writeConfig(
      'job.jwt',
      `${await sign(await claims({ environment: 'cli' }), 'key-2')}\n`,
    );
    const run = await login('--oidc-token-file', file);
    expect(run.code).toBe(0);
    const token = run.stdout.trim();
    expect(ok(await app.gql(token, '{ whoami { name } }')).whoami.name).toBe('gha:octo/app:cli');
    const again = await login('--oidc-token-file', file);
    expect(again.code).toBe(3);
    expect(again.stderr).toContain('UNAUTHENTICATED');
  });

  test('without a token source it is a usage error', async () => {
    const run = await login();
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('exactly one of');
  });
});
