/**
 * Environment patterns (`*` any run of characters) are matched in linear time: a token
 * whose pattern has many `*` costs no more to check than any other, and matches as before.
 */
import { ADMIN_TOKEN, startApp, type TestApp } from '../support/app.js';
import { codeOf, ok, World } from '../support/world.js';

let app: TestApp;
let world: World;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
});
afterAll(() => app.close());

async function scopedAgent(name: string, environments: string[]): Promise<string> {
  return ok(
    await app.gql<{ issueToken: { token: string } }>(
      ADMIN_TOKEN,
      'mutation($n: String!, $e: [String!]) { issueToken(name: $n, role: AGENT, environments: $e) { token } }',
      { n: name, e: environments },
    ),
  ).issueToken.token;
}

// A backtracking matcher takes tens of seconds on this pair (and years at 31 stars).
test('a pattern of many stars that fails on a long name is refused at once', async () => {
  const name = 'a'.repeat(40);
  await world.createEnvironment(name, 'MONOTONIC', false);
  const token = await scopedAgent('stars', ['a*a*a*a*a*a*a*a*a*a*b', `${'a*'.repeat(31)}b`]);
  const result = await world.acquireRaw(token, name, 30);
  expect(codeOf(result)).toBe('FORBIDDEN');
}, 15_000);

test.each([
  ['staging-*', 'staging-eu', 'OK'],
  ['staging-*', 'staging-', 'OK'],
  ['staging-*', 'prod', 'FORBIDDEN'],
  ['*-eu', 'prod-eu', 'OK'],
  ['*-eu', 'prod-eu-2', 'FORBIDDEN'],
  ['a*b*c', 'aXbYc', 'OK'],
  ['a*b*c', 'abc', 'OK'],
  ['a*b*c', 'acb', 'FORBIDDEN'],
  ['a*a*b', 'aab', 'OK'],
  ['a*a', 'a', 'FORBIDDEN'],
  ['*', 'anything', 'OK'],
  ['ab.c', 'abxc', 'FORBIDDEN'],
])('pattern %s on %s: %s', async (pattern, environment, expected) => {
  await world
    .gql(ADMIN_TOKEN, 'mutation($n: String!) { createEnvironment(input: { name: $n }) { name } }', {
      n: environment,
    })
    .catch(() => undefined);
  const token = await scopedAgent(`p-${Math.random().toString(36).slice(2, 10)}`, [pattern]);
  const code = codeOf(await world.acquireRaw(token, environment, 30));
  expect(code === 'FORBIDDEN' ? 'FORBIDDEN' : 'OK').toBe(expected);
});
