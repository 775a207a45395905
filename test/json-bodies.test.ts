/**
 * A JSON body over LARGE_BODY_BYTES is decoded and parsed on a thread of the service's own,
 * not on the request thread, and is answered exactly as the same body would be when small:
 * the same refusals (not JSON, a `__proto__` or `constructor.prototype` key), the same
 * acceptances (a byte-order mark, multi-byte characters), the same plan stored. Should that
 * thread fail, the body is parsed on the request thread, as before.
 */
import Fastify from 'fastify';
import { createHash } from 'node:crypto';
import { LARGE_BODY_BYTES } from '../src/limits/large-bodies.js';
import { parseLargeJsonBodiesAside } from '../src/limits/json-bodies.js';
import { ADMIN_TOKEN, startApp, type TestApp } from './support/app.js';
import { metric } from './support/metrics.js';
import { World } from './support/world.js';

let app: TestApp;

beforeAll(async () => {
  app = await startApp();
});
afterAll(() => app.close());

const parsed = (where: 'thread' | 'request_thread') =>
  metric(app.url, `planfence_large_json_bodies_total{parsed="${where}"}`);

/** POST /graphql with this exact body; the status and the answer's text. */
async function post(body: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body,
  });
  return { status: response.status, text: await response.text() };
}

/** Bodies of every kind, each with a string field `pad` of `padding` characters. */
const bodies = (padding: string) => ({
  'not JSON': `{"query":"{ __typename }","pad":"${padding}"`,
  'a __proto__ key': `{"query":"{ __typename }","pad":"${padding}","__proto__":{"admin":true}}`,
  'a constructor.prototype key': `{"query":"{ __typename }","pad":"${padding}","constructor":{"prototype":{"admin":true}}}`,
  'a byte-order mark': `\ufeff{"query":"{ __typename }","pad":"${padding}"}`,
  'multi-byte characters': `{"query":"{ __typename }","pad":"${padding}é€😀"}`,
  'a plain query': `{"query":"{ whoami { name } }","pad":"${padding}"}`,
});

test('every kind of body over the threshold gets the answer it gets when small, and is parsed on the thread', async () => {
  const before = await parsed('thread');
  const small = bodies('');
  const large = bodies('x'.repeat(LARGE_BODY_BYTES));
  const answers: Record<string, string> = {};
  for (const kind of Object.keys(small) as (keyof typeof small)[]) {
    expect(Buffer.byteLength(large[kind])).toBeGreaterThan(LARGE_BODY_BYTES);
    const [whenSmall, whenLarge] = [await post(small[kind]), await post(large[kind])];
    expect({ kind, ...whenLarge }).toEqual({ kind, ...whenSmall });
    answers[kind] = `${whenSmall.status} ${whenSmall.text}`;
  }
  // What those answers are: the refusals say why; the others are served.
  const notJson = `400 ${JSON.stringify({
    data: null,
    errors: [
      {
        message: "Body is not valid JSON but content-type is set to 'application/json'",
        extensions: { code: 'BAD_USER_INPUT' },
      },
    ],
  })}`;
  expect(answers).toEqual({
    'not JSON': notJson,
    'a __proto__ key': notJson,
    'a constructor.prototype key': notJson,
    'a byte-order mark': '200 {"data":{"__typename":"Query"}}',
    'multi-byte characters': '200 {"data":{"__typename":"Query"}}',
    'a plain query': `200 ${JSON.stringify({ data: { whoami: { name: 'admin' } } })}`,
  });
  expect((await parsed('thread')) - before).toBe(Object.keys(large).length);
  expect(await parsed('request_thread')).toBe(0);
});

test('a large plan of multi-byte characters parsed on the thread is stored whole', async () => {
  const world = new World(app);
  const agent = await world.issue('json-agent', 'AGENT');
  await world.createEnvironment('json-bodies', 'MONOTONIC', false);
  const generation = await world.acquire(agent, 'json-bodies', 600);
  const before = await parsed('thread');
  const content = `plan ${'ü€😀 \\ " \n'.repeat(LARGE_BODY_BYTES / 8)}`;
  const plan = await world.submitOk(agent, 'json-bodies', generation, content);
  expect((await parsed('thread')) - before).toBe(1);
  const stored = await world.plan(plan.id);
  expect(stored?.content).toBe(content);
  expect(stored?.contentHash).toContain(createHash('sha256').update(content).digest('hex'));
});

test('when the thread cannot run, a large body is parsed on the request thread and served all the same', async () => {
  const fastify = Fastify();
  // A parser module that does not exist: the thread fails as it starts.
  const counts = parseLargeJsonBodiesAside(fastify, '/nonexistent/secure-json-parse.js');
  fastify.post('/echo', (request) => ({ pad: (request.body as { pad: string }).pad.length }));
  try {
    const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
    for (const round of [1, 2]) {
      const response = await fetch(`${url}/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"pad":"${'y'.repeat(LARGE_BODY_BYTES + round)}"}`,
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ pad: LARGE_BODY_BYTES + round });
    }
    expect(counts).toEqual({ aside: 0, here: 2 });
  } finally {
    await fastify.close();
  }
});
