/**
 * OIDC exchange against a hostile or broken issuer, and a flood of exchanges: discovery
 * and key documents are read within a size bound, a failed discovery is not fetched again
 * for every request, a `jti` must be a string, exchanges are rate-limited per source
 * address, and their records go with the retention period.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Database } from '../../src/database/database.js';
import { RetentionService } from '../../src/retention/retention.service.js';
import { codeOf, scratchDir, startApp, type TestApp } from '../support/app.js';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

let server: Server;
let base = '';
let keys: KeyPair;
const fetches = { broken: 0, big: 0 };
const dir = scratchDir();
const apps: TestApp[] = [];

/** Issuers at `<base>/ok`, `<base>/big` (a 5 MB discovery document) and `<base>/broken` (HTTP 500). */
beforeAll(async () => {
  keys = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  server = createServer((req, res) => {
    const discovery = /^\/(ok|big|broken)\/\.well-known\/openid-configuration$/.exec(req.url ?? '');
    res.setHeader('content-type', 'application/json');
    if (discovery?.[1] === 'broken') {
      fetches.broken++;
      res.statusCode = 500;
      res.end('{}');
    } else if (discovery) {
      const document: Record<string, unknown> = {
        issuer: `${base}/${discovery[1]}`,
        jwks_uri: `${base}/jwks`,
      };
      if (discovery[1] === 'big') {
        fetches.big++;
        document.padding = 'x'.repeat(5 * 1024 * 1024);
      }
      res.end(JSON.stringify(document));
    } else if (req.url === '/jwks') {
      res.end(JSON.stringify({ keys: [jwk] }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  dir.cleanup();
});

async function service(env: Record<string, string> = {}): Promise<TestApp> {
  const rules = [{ claims: { sub: '*' }, principal: 'ci:{sub}', role: 'VIEWER' }];
  const path = join(dir.path, `oidc-${apps.length}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      issuers: ['ok', 'big', 'broken'].map((name) => ({
        issuer: `${base}/${name}`,
        audience: 'planfence',
        algorithms: ['RS256'],
        rules,
      })),
    }),
  );
  const app = await startApp({ PLANFENCE_OIDC_CONFIG: path, ...env });
  apps.push(app);
  return app;
}

let jtis = 0;
async function jwt(app: TestApp, issuer: string, claims: Record<string, unknown> = {}) {
  const now = Math.floor((await app.clock.now()) / 1000);
  return new SignJWT({ jti: `jti-${++jtis}`, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(`${base}/${issuer}`)
    .setAudience((claims.aud as string | undefined) ?? 'planfence')
    .setSubject(`job-${jtis}`)
    .setIssuedAt(now)
    .setExpirationTime(now + 600)
    .sign(keys.privateKey);
}

const EXCHANGE = 'mutation($t: String!) { exchangeOidcToken(token: $t) { token } }';
const exchange = (app: TestApp, token: string) => app.gql(null, EXCHANGE, { t: token });

describe('one service', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await service();
  });

  test('a valid token from the sound issuer is exchanged', async () => {
    expect(codeOf(await exchange(app, await jwt(app, 'ok')))).toBe('OK');
  });

  test('a discovery document beyond the size bound is refused without being read whole', async () => {
    const result = await exchange(app, await jwt(app, 'big'));
    expect(codeOf(result)).toBe('UNAUTHENTICATED');
    expect(result.errors![0].message).toContain('larger than');
  });

  test('a failed discovery is fetched once for many exchanges, each refused', async () => {
    for (let i = 0; i < 5; i++) {
      const result = await exchange(app, await jwt(app, 'broken'));
      expect(codeOf(result)).toBe('UNAUTHENTICATED');
      expect(result.errors![0].message).toContain('HTTP 500');
    }
    expect(fetches.broken).toBe(1);
  });

  test('a jti that is not a string is refused', async () => {
    const result = await exchange(app, await jwt(app, 'ok', { jti: 12345 }));
    expect(codeOf(result)).toBe('UNAUTHENTICATED');
    expect(result.errors![0].message).toContain('jti');
  });
});

test('exchanges are rate-limited per source; refused ones write nothing; records go with retention', async () => {
  const app = await service({ PLANFENCE_OIDC_EXCHANGES_PER_MINUTE: '3' });
  const codes: string[] = [];
  for (let i = 0; i < 6; i++) {
    codes.push(codeOf(await exchange(app, await jwt(app, 'ok', { aud: 'someone-else' }))));
  }
  expect(codes.slice(0, 3)).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
  expect(codes.slice(3)).toEqual(['RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
  const count = async () =>
    Number(
      (
        await app.app
          .get(Database)
          .read<{ n: number | string }[]>((m) =>
            m.query('SELECT COUNT(*) AS n FROM oidc_exchanges'),
          )
      )[0].n,
    );
  expect(await count()).toBe(3);

  app.clock.advance(31 * 24 * 3600 * 1000);
  await app.get(RetentionService).purge();
  expect(await count()).toBe(0);
});
