/**
 * A response priced by the bytes of its JSON, escaping included. Environments whose current
 * plans hold 1 MiB of U+0001 each (`\u0001` is 6 bytes of JSON; the attack as found had 95
 * of them: 570 MiB of JSON, more than a JavaScript string may hold). A VIEWER asking for
 * every current plan's content gets a coded refusal naming the limit, never HTTP 500.
 */
import { startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';
import { escapedBytes, jsonBytesOver } from '../src/limits/response-bytes.js';

let app: TestApp;
let world: World;
beforeAll(async () => {
  app = await startApp({ PLANFENCE_RATE_WRITES_BURST: '100000' });
  world = new World(app);
});
afterAll(() => app.close());

test('escaped bytes: control characters 6, quotes and backslashes 2, UTF-8 as encoded', () => {
  for (const s of [
    '',
    'plain',
    '\u0001\u0002',
    '"\\',
    '\n\t',
    'é',
    '€',
    '😀',
    '\ud800x',
    'x\udc00',
  ]) {
    expect(escapedBytes(s)).toBe(Buffer.byteLength(JSON.stringify(s)));
  }
  const value = { a: ['\u0001'.repeat(100), { b: 'x' }], c: null, d: 5 };
  const bytes = JSON.stringify(value).length;
  expect(jsonBytesOver(value, bytes + 100)).toBe(false);
  expect(jsonBytesOver(value, 600)).toBe(true);
});

/**
 * The fewest plans whose JSON is over the default limit (128 MiB) only by its escapes: 22 MiB
 * of strings, 132 MiB of JSON. A service that priced the strings would serve them; one that
 * priced nothing would too. `ESCAPED_PLANS=95` replays the attack as it was found (570 MiB
 * of JSON, more than a string may hold: a service that priced nothing answered INTERNAL).
 */
const PLANS = Number(process.env.ESCAPED_PLANS ?? 22);

test(`${PLANS} current plans of 1 MiB of \\u0001 each: a VIEWER reading all of them is refused with limit responseBytes, not INTERNAL`, async () => {
  const agent = await world.issue('agent', 'AGENT');
  const viewer = await world.issue('viewer', 'VIEWER');
  const content = '\u0001'.repeat(1024 * 1024);
  for (let i = 0; i < PLANS; i++) {
    const env = `e${i}`;
    await world.createEnvironment(env, 'MONOTONIC', false);
    const generation = await world.acquire(agent, env, 600);
    await world.submitOk(agent, env, generation, content);
  }
  const result = await world.gql(viewer, '{ environments { name currentPlan { content } } }');
  expect(result.status).toBe(400);
  expect(codeOf(result)).toBe('BAD_USER_INPUT');
  expect(result.errors![0].extensions).toMatchObject({ limit: 'responseBytes' });
  expect(result.errors![0].message).toMatch(/PLANFENCE_MAX_RESPONSE_BYTES/);
  expect(result.data).toBeNull();
  // What fits is served: names only, and one plan's content.
  expect(ok(await world.gql(viewer, '{ environments { name } }')).environments).toHaveLength(PLANS);
  const one = ok(
    await world.gql<{ environment: { currentPlan: { content: string } } }>(
      viewer,
      '{ environment(name: "e7") { currentPlan { content } } }',
    ),
  );
  expect(one.environment.currentPlan.content).toBe(content);
  // The service still answers.
  expect((await fetch(`${app.url}/health`)).status).toBe(200);
}, 240_000);
