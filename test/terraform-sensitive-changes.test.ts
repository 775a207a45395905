/**
 * DESIGN R54 through GraphQL: a changed sensitive value still shows as a changed row. Each
 * ResourceChange names the attributes whose sensitive value changes (`sensitiveChanges`),
 * computed at submit from the values as submitted; a summary stored before the field
 * existed reads [].
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { ok, World } from './support/world.js';

const SUMMARY = 'summary { resourceChanges { address before after sensitiveChanges } }';

interface Change {
  address: string;
  before: string | null;
  after: string | null;
  sensitiveChanges: string[];
}

let app: TestApp;
let world: World;
let agent: string;
let generation: number;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('infra', 'MONOTONIC');
  generation = await world.acquire(agent, 'infra', 3600);
});
afterAll(() => app.close());

async function changes(id: string): Promise<Record<string, Change>> {
  const plan = ok(
    await world.gql<{ plan: { summary: { resourceChanges: Change[] } } }>(
      world.admin,
      `query($id: ID!) { plan(id: $id) { ${SUMMARY} } }`,
      { id },
    ),
  ).plan;
  return Object.fromEntries(plan.summary.resourceChanges.map((c) => [c.address, c]));
}

// proves: R54
test('R54: the attributes whose sensitive value changes are named; an older summary reads []', async () => {
  const content = readFileSync(
    join(process.cwd(), 'test/fixtures/terraform/sensitive.json'),
    'utf8',
  );
  const plan = await world.submitOk(agent, 'infra', generation, content, {
    contentType: 'TERRAFORM_PLAN_JSON',
  });
  const byAddress = await changes(plan.id);
  const db = byAddress['module.db.aws_db_instance.main'];
  expect(db.sensitiveChanges).toEqual(['password', 'replicas']);
  expect(JSON.parse(db.before!).password).toBe('(sensitive)');
  expect(JSON.parse(db.after!).password).toBe('(sensitive)');
  expect(byAddress['aws_ssm_parameter.api_key'].sensitiveChanges).toEqual([]);

  // A summary stored before sensitiveChanges existed.
  const database = app.get(DataSource);
  const [$1, $2] = TEST_DATABASE === 'postgres' ? ['$1', '$2'] : ['?', '?'];
  const [row] = await database.query<{ summary: string }[]>(
    `SELECT summary FROM plans WHERE id = ${$1}`,
    [plan.id],
  );
  const older = JSON.parse(row.summary) as { resourceChanges: Record<string, unknown>[] };
  for (const change of older.resourceChanges) delete change.sensitiveChanges;
  await database.query(`UPDATE plans SET summary = ${$1} WHERE id = ${$2}`, [
    JSON.stringify(older),
    plan.id,
  ]);
  const read = await changes(plan.id);
  for (const change of Object.values(read)) expect(change.sensitiveChanges).toEqual([]);
  expect(read['module.db.aws_db_instance.main'].after).toBe(db.after);
});
