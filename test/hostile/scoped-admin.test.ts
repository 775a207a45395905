/**
 * An ADMIN token limited to environments (R26) administers those environments and nothing
 * else: every operation on tokens, principals and webhooks (which are not addressed by
 * environment) is FORBIDDEN for it, changes nothing, and the real admin keeps working.
 */
import { ADMIN_TOKEN, startApp, type TestApp } from '../support/app.js';
import { codeOf, ok, World } from '../support/world.js';

let app: TestApp;
let world: World;
let scoped: string;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  await world.createEnvironment('staging-eu', 'MONOTONIC', false);
  await world.createEnvironment('prod', 'MONOTONIC', false);
  await world.issue('victim', 'AGENT');
  scoped = ok(
    await app.gql<{ issueToken: { token: string } }>(
      ADMIN_TOKEN,
      'mutation { issueToken(name: "staging-admin", role: ADMIN, environments: ["staging-*"]) { token } }',
    ),
  ).issueToken.token;
});
afterAll(() => app.close());

const escapes: [string, string][] = [
  [
    'issueToken with no environments',
    'mutation { issueToken(name: "root2", role: ADMIN) { token } }',
  ],
  [
    'issueToken within its own scope',
    'mutation { issueToken(name: "ci-eu", role: AGENT, environments: ["staging-eu"]) { token } }',
  ],
  ['rotateToken of the admin', 'mutation { rotateToken(name: "admin") { token } }'],
  ['revokeToken of another principal', 'mutation { revokeToken(name: "victim") { name } }'],
  ['principals', '{ principals { name } }'],
  [
    'setPrincipalGroups',
    'mutation { setPrincipalGroups(name: "staging-admin", groups: ["sre"]) { name } }',
  ],
  ['webhooks', '{ webhooks { id } }'],
];

test.each(escapes)('a scoped ADMIN: %s is FORBIDDEN', async (_, query) => {
  const result = await app.gql(scoped, query);
  expect(codeOf(result)).toBe('FORBIDDEN');
  expect(result.errors![0].message).toContain('limited to environments');
});

test('nothing changed: the admin token works, no principal was made, no group was set', async () => {
  const principals = ok(
    await app.gql<{ principals: { name: string; groups: string[]; revokedAt: string | null }[] }>(
      ADMIN_TOKEN,
      '{ principals { name groups revokedAt } }',
    ),
  ).principals;
  expect(principals.map((p) => p.name).sort()).toEqual(['admin', 'staging-admin', 'victim']);
  expect(principals.find((p) => p.name === 'staging-admin')!.groups).toEqual([]);
  expect(principals.find((p) => p.name === 'victim')!.revokedAt).toBeNull();
});

test('a scoped ADMIN still administers its own environments, and only those', async () => {
  const frozen = await app.gql(
    scoped,
    'mutation { freezeEnvironment(environment: "staging-eu", reason: "release") { name } }',
  );
  expect(codeOf(frozen)).toBe('OK');
  const outside = await app.gql(
    scoped,
    'mutation { freezeEnvironment(environment: "prod", reason: "x") { name } }',
  );
  expect(codeOf(outside)).toBe('FORBIDDEN');
  expect(ok(await app.gql(scoped, '{ whoami { name } }')).whoami).toEqual({
    name: 'staging-admin',
  });
});
