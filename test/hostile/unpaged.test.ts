/**
 * A list without a page size (`environments` without `first`, `principals`, `webhooks`)
 * is priced with the number of rows it would return, not a guess: plan content of every
 * environment is refused with BAD_USER_INPUT limit: cost when that is over the limit.
 */
import { startApp, type TestApp } from '../support/app.js';
import { codeOf, ok, World } from '../support/world.js';

let app: TestApp;
let world: World;

beforeAll(async () => {
  // Content weighs 64 (KiB); 150 environments × (64 + 3) = 10050 > 8000 > 100 × (64 + 3).
  app = await startApp({ PLANFENCE_MAX_PLAN_BYTES: '65536', PLANFENCE_MAX_QUERY_COST: '8000' });
  world = new World(app);
  for (let batch = 0; batch < 5; batch++) {
    const fields = Array.from(
      { length: 30 },
      (_, i) =>
        `e${i}: createEnvironment(input: { name: "env-${batch}-${String(i).padStart(2, '0')}" }) { name }`,
    );
    ok(await world.gql(world.admin, `mutation { ${fields.join(' ')} }`));
  }
});
afterAll(() => app.close());

test('environments without first is priced with the real number of environments', async () => {
  const all = await world.gql(world.admin, '{ environments { name currentPlan { content } } }');
  expect(codeOf(all)).toBe('BAD_USER_INPUT');
  expect(all.errors![0].extensions).toMatchObject({ limit: 'cost', max: 8000 });
  expect(all.errors![0].message).toContain('10050');
});

test('a page of them, or all of them without content, is answered', async () => {
  const page = ok(
    await world.gql<{ environments: unknown[] }>(
      world.admin,
      '{ environments(first: 100) { name currentPlan { content } } }',
    ),
  );
  expect(page.environments).toHaveLength(100);
  const names = ok(
    await world.gql<{ environments: unknown[] }>(world.admin, '{ environments { name } }'),
  );
  expect(names.environments).toHaveLength(150);
});
