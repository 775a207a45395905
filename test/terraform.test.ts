/**
 * DESIGN §15 (R31, R32, R54, R56): Terraform plans are understood. The service validates the
 * JSON of `terraform show -json PLANFILE`, computes the summary itself and stores it with the
 * plan, immutable; values Terraform marks sensitive read "(sensitive)" in the summary and in
 * the stored content; the plan file travels with the plan, with its hash, readable by
 * DEPLOYER and ADMIN only, and its prior state is read from it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RetentionService } from '../src/retention/retention.service.js';
import { maskTerraformPlanJson } from '../src/terraform/terraform-plan.js';
import { TerraformParser } from '../src/terraform/terraform-parser.js';
import { startApp, type TestApp } from './support/app.js';
import { LINEAGE, planFile, planFileBase64, state } from './support/plan-file.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

const FIXTURES = join(process.cwd(), 'test/fixtures/terraform');
const fixture = (name: string) => readFileSync(join(FIXTURES, `${name}.json`), 'utf8');

const SUMMARY =
  'summary { add change destroy replace read noop terraformVersion resourceChanges { address type actions before after } }';
/** What an AGENT may read of a plan: all but the plan file (R54). */
const FIELDS = `id status content contentType contentHash artifactHash basedOnDeploymentSequence sourceRevision priorState { lineage serial } ${SUMMARY}`;
/** What a DEPLOYER or an ADMIN reads. */
const ALL_FIELDS = `${FIELDS} artifact`;

interface ResourceChange {
  address: string;
  type: string;
  actions: string[];
  before: string | null;
  after: string | null;
}
interface TerraformPlan {
  id: string;
  status: string;
  content: string;
  contentType: 'TEXT' | 'TERRAFORM_PLAN_JSON';
  contentHash: string;
  artifact?: string | null;
  artifactHash: string | null;
  basedOnDeploymentSequence: number | null;
  priorState: { lineage: string; serial: number } | null;
  sourceRevision: string | null;
  summary: {
    add: number;
    change: number;
    destroy: number;
    replace: number;
    read: number;
    noop: number;
    terraformVersion: string | null;
    resourceChanges: ResourceChange[];
  } | null;
}

let app: TestApp;
let world: World;
let agent: string;
let generation: number;

beforeAll(async () => {
  app = await startApp({ PLANFENCE_MAX_ARTIFACT_BYTES: '1024' });
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('infra', 'MONOTONIC');
  generation = await world.acquire(agent, 'infra', 3600);
});
afterAll(() => app.close());

function submit(input: Record<string, unknown>) {
  return world.gql<{ submitPlan: TerraformPlan }>(
    agent,
    `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${FIELDS} } }`,
    { input: { environment: 'infra', generation, idempotencyKey: freshKey(), ...input } },
  );
}

async function submitTerraform(content: string, extra: Record<string, unknown> = {}) {
  return ok(await submit({ content, contentType: 'TERRAFORM_PLAN_JSON', ...extra })).submitPlan;
}

async function read(id: string): Promise<TerraformPlan> {
  const result = await world.gql<{ plan: TerraformPlan }>(
    world.admin,
    `query($id: ID!) { plan(id: $id) { ${ALL_FIELDS} } }`,
    { id },
  );
  return ok(result).plan;
}

/** The document as the service keeps it: the JSON of its parse, sensitive values masked (R54). */
const parsed = (content: string): unknown => JSON.parse(maskTerraformPlanJson(content));

const counts = (plan: TerraformPlan) => {
  const { add, change, destroy, replace, read, noop } = plan.summary!;
  return { add, change, destroy, replace, read, noop };
};
const listed = (plan: TerraformPlan) =>
  plan.summary!.resourceChanges.map((change) => [change.address, change.actions.join(',')]);

test('a submit answers with the plan as stored: its content, summary and artifact read back the same', async () => {
  const content = fixture('create');
  const artifact = planFileBase64(7);
  const submitted = await submitTerraform(content, { artifact });
  expect(parsed(submitted.content)).toEqual(parsed(content));
  expect(submitted.contentHash).toBe(createHash('sha256').update(submitted.content).digest('hex'));
  expect(submitted.priorState).toEqual({ lineage: LINEAGE, serial: 7 });
  expect(submitted.summary).not.toBeNull();
  expect(await read(submitted.id)).toEqual({ ...submitted, artifact });

  const text = 'line one\nunicode \u00e9\u{1F680}\n';
  const plain = ok(await submit({ content: text })).submitPlan;
  expect(plain).toMatchObject({ content: text, summary: null, priorState: null });
  expect(await read(plain.id)).toEqual({ ...plain, artifact: null });
});

test('a plan is TEXT by default and has no summary', async () => {
  const plan = ok(await submit({ content: 'opaque text' })).submitPlan;
  expect(plan).toMatchObject({ contentType: 'TEXT', summary: null });
});

// proves: R54
test('R54: the plan file is read by DEPLOYER and ADMIN only; AGENT, REVIEWER and VIEWER are refused FORBIDDEN', async () => {
  const artifact = planFileBase64(2);
  const plan = await submitTerraform(fixture('update'), { artifact });
  const query = 'query($id: ID!) { plan(id: $id) { id artifact artifactHash } }';
  for (const role of ['AGENT', 'REVIEWER', 'VIEWER'] as const) {
    const token = await world.issue(`reader-${role.toLowerCase()}`, role);
    const refused = await world.gql<{ plan: { artifact: string | null } }>(token, query, {
      id: plan.id,
    });
    expect(codeOf(refused)).toBe('FORBIDDEN');
    expect(refused.data?.plan?.artifact ?? null).toBeNull();
    // The rest of the plan reads as usual, the hash of the file included.
    const hashOnly = await world.gql<{ plan: { artifactHash: string } }>(
      token,
      'query($id: ID!) { plan(id: $id) { artifactHash } }',
      { id: plan.id },
    );
    expect(ok(hashOnly).plan.artifactHash).toBe(plan.artifactHash);
  }
  const deployer = await world.issue('reader-deployer', 'DEPLOYER');
  const read = await world.gql<{ plan: { artifact: string } }>(deployer, query, { id: plan.id });
  expect(ok(read).plan.artifact).toBe(artifact);
});

// proves: R56
test('R56: a plan file that is not a zip, has no tfstate entry or a tfstate without lineage is refused with BAD_USER_INPUT; nothing is stored', async () => {
  const cases: [string, RegExp][] = [
    [Buffer.from('a binary plan file').toString('base64'), /zip/],
    [planFile(null).toString('base64'), /tfstate/],
    [planFile({ data: state({ lineage: undefined }) }).toString('base64'), /lineage/],
  ];
  for (const [artifact, message] of cases) {
    const before = (await world.plans('infra')).length;
    const refused = await submit({
      content: fixture('update'),
      contentType: 'TERRAFORM_PLAN_JSON',
      artifact,
    });
    expect(codeOf(refused)).toBe('BAD_USER_INPUT');
    expect(refused.errors![0].message).toMatch(message);
    expect(await world.plans('infra')).toHaveLength(before);
  }
});

test.each([
  [
    'create',
    { add: 6, change: 0, destroy: 0, replace: 0, read: 0, noop: 0 },
    [
      ['terraform_data.app', 'create'],
      ['terraform_data.cache', 'create'],
      ['terraform_data.db', 'create'],
      ['terraform_data.keep', 'create'],
      ['terraform_data.old[0]', 'create'],
      ['terraform_data.secret', 'create'],
    ],
  ],
  [
    'update',
    { add: 0, change: 1, destroy: 0, replace: 0, read: 0, noop: 1 },
    [['terraform_data.app', 'update']],
  ],
  [
    'replace',
    { add: 0, change: 0, destroy: 0, replace: 2, read: 0, noop: 0 },
    [
      ['terraform_data.cache', 'create,delete'],
      ['terraform_data.db', 'delete,create'],
    ],
  ],
  [
    'delete',
    { add: 0, change: 0, destroy: 1, replace: 0, read: 0, noop: 0 },
    [['terraform_data.old[0]', 'delete']],
  ],
  ['noop', { add: 0, change: 0, destroy: 0, replace: 0, read: 0, noop: 6 }, []],
  [
    'read',
    { add: 0, change: 0, destroy: 0, replace: 0, read: 1, noop: 0 },
    [['data.terraform_remote_state.net', 'read']],
  ],
  [
    'mixed',
    { add: 0, change: 2, destroy: 1, replace: 2, read: 1, noop: 1 },
    [
      ['data.terraform_remote_state.net', 'read'],
      ['terraform_data.app', 'update'],
      ['terraform_data.cache', 'create,delete'],
      ['terraform_data.db', 'delete,create'],
      ['terraform_data.old[0]', 'delete'],
      ['terraform_data.secret', 'update'],
    ],
  ],
])(
  'the %s plan is summarised by the service and stored with it',
  async (name, expected, changes) => {
    const content = fixture(name);
    const submitted = await submitTerraform(content);
    expect(submitted.contentType).toBe('TERRAFORM_PLAN_JSON');
    expect(counts(submitted)).toEqual(expected);
    expect(listed(submitted)).toEqual(changes);
    expect(submitted.summary!.terraformVersion).toBe('1.11.4');
    // Stored: read back later, the same summary; the content is the document as submitted
    // (it has no sensitive values to mask).
    const stored = await read(submitted.id);
    expect(stored.summary).toEqual(submitted.summary);
    expect(parsed(stored.content)).toEqual(parsed(content));
  },
);

// proves: R31
test('a resource change carries its values before and after as JSON', async () => {
  const plan = await submitTerraform(fixture('update'));
  const [app] = plan.summary!.resourceChanges;
  expect(app.type).toBe('terraform_data');
  expect(JSON.parse(app.before!)).toMatchObject({ input: 'app-1', output: 'app-1' });
  expect(JSON.parse(app.after!)).toMatchObject({ input: 'app-2' });
  const created = await submitTerraform(fixture('create'));
  expect(created.summary!.resourceChanges[0].before).toBeNull();
});

// proves: R32
test('R32: every value Terraform marks sensitive reads "(sensitive)" in the summary', async () => {
  const content = fixture('sensitive');
  const plan = await submitTerraform(content);
  const byAddress = Object.fromEntries(
    plan.summary!.resourceChanges.map((change) => [change.address, change]),
  );

  const secret = byAddress['terraform_data.secret'];
  expect(JSON.parse(secret.before!).input).toEqual({
    password: '(sensitive)',
    rev: '1',
    user: 'admin',
  });
  expect(JSON.parse(secret.after!).input).toEqual({
    password: '(sensitive)',
    rev: '2',
    user: 'admin',
  });

  const db = byAddress['module.db.aws_db_instance.main'];
  expect(db.type).toBe('aws_db_instance');
  expect(JSON.parse(db.after!)).toEqual({
    identifier: '(sensitive)',
    instance_class: 'db.t3.small',
    password: '(sensitive)',
    username: '(sensitive)',
    replicas: [
      { name: 'r1', token: '(sensitive)' },
      { name: 'r2', token: '(sensitive)' },
    ],
  });

  const parameter = byAddress['aws_ssm_parameter.api_key'];
  expect(parameter.before).toBeNull();
  expect(JSON.parse(parameter.after!).value).toBe('(sensitive)');

  const summaryText = JSON.stringify(plan.summary);
  // hunter2 is also in terraform_data.secret's before.output, which Terraform leaves unmarked:
  // the value of a variable declared sensitive (here its default) is masked wherever it appears.
  expect(JSON.parse(secret.before!).output).toEqual({
    password: '(sensitive)',
    rev: '1',
    user: 'admin',
  });
  for (const secretValue of [
    'hunter2',
    's3cret',
    'new-db-password-2',
    'old-db-password-1',
    'replica-token-3',
    'api-key-value-9',
  ]) {
    expect(content).toContain(secretValue);
    expect(summaryText).not.toContain(secretValue);
    // R54: nor in the content the service keeps and hands out.
    expect(plan.content).not.toContain(secretValue);
    expect((await read(plan.id)).content).not.toContain(secretValue);
  }
});

// proves: R32
test('R32: a sensitive variable echoed unmarked inside a longer string, or as a number, reads "(sensitive)" too', async () => {
  const content = JSON.stringify({
    format_version: '1.2',
    terraform_version: '1.11.4',
    variables: { token: { value: 'tok-51b7e2' }, pin: { value: 4711 } },
    configuration: {
      root_module: { variables: { token: { sensitive: true }, pin: { sensitive: true } } },
    },
    resource_changes: [
      {
        address: 'terraform_data.echo',
        type: 'terraform_data',
        name: 'echo',
        mode: 'managed',
        change: {
          actions: ['create'],
          before: null,
          after: {
            input: 'Bearer tok-51b7e2',
            output: { header: 'Bearer tok-51b7e2', pin: 4711, tries: 3 },
            other: 'plain',
          },
          before_sensitive: false,
          after_sensitive: {},
        },
      },
    ],
  });
  const plan = await submitTerraform(content);
  const [echo] = plan.summary!.resourceChanges;
  expect(JSON.parse(echo.after!)).toEqual({
    input: '(sensitive)',
    output: { header: '(sensitive)', pin: '(sensitive)', tries: 3 },
    other: 'plain',
  });
  const summaryText = JSON.stringify(plan.summary);
  expect(summaryText).not.toContain('tok-51b7e2');
  expect(summaryText).not.toContain('4711');
});

test.each([
  ['a document that is not JSON', '{"format_version": "1.2",', /must be JSON/],
  ['a JSON array', '[]', /must be a JSON object/],
  ['a JSON string', '"plan"', /must be a JSON object/],
  ['a document without format_version', '{"resource_changes": []}', /format_version/],
  ['a document whose format_version is a number', '{"format_version": 1.2}', /format_version/],
  [
    'a document of an unsupported format_version',
    '{"format_version": "2.0"}',
    /format_version 2\.0/,
  ],
  [
    'a document whose resource_changes is not an array',
    '{"format_version": "1.2", "resource_changes": {}}',
    /resource_changes must be an array/,
  ],
  [
    'a resource change that is not an object',
    '{"format_version": "1.2", "resource_changes": [1]}',
    /resource_changes\[0\] must be an object/,
  ],
  [
    'a resource change without an address',
    '{"format_version": "1.2", "resource_changes": [{"type": "t", "change": {"actions": ["create"]}}]}',
    /resource_changes\[0\]\.address/,
  ],
  [
    'a resource change without a change',
    '{"format_version": "1.2", "resource_changes": [{"address": "a.b", "type": "a"}]}',
    /resource_changes\[0\]\.change must be an object/,
  ],
  [
    'a resource change whose actions are not a list of strings',
    '{"format_version": "1.2", "resource_changes": [{"address": "a.b", "type": "a", "change": {"actions": "create"}}]}',
    /resource_changes\[0\]\.change\.actions must be an array of strings/,
  ],
  [
    'an action list Terraform never writes',
    '{"format_version": "1.2", "resource_changes": [{"address": "a.b", "type": "a", "change": {"actions": ["create","update"]}}]}',
    /\["create","update"\] is not an action list/,
  ],
  [
    'a document with arrays nested 65 deep',
    `{"format_version": "1.2", "x": ${'['.repeat(64)}${']'.repeat(64)}}`,
    /more than 64 levels deep/,
  ],
])(
  'a TERRAFORM_PLAN_JSON submit of %s is refused with BAD_USER_INPUT naming it',
  async (_, content, message) => {
    const before = (await world.plans('infra')).length;
    const refused = await submit({ content, contentType: 'TERRAFORM_PLAN_JSON' });
    expect(codeOf(refused)).toBe('BAD_USER_INPUT');
    expect(refused.errors![0].message).toMatch(message);
    expect((await world.plans('infra')).length).toBe(before);
  },
);

test('nesting up to the bound is accepted, brackets inside strings do not count', async () => {
  const content = `{"format_version": "1.2", "x": ${'['.repeat(63)}"]]]][[[["${']'.repeat(63)}}`;
  const plan = await submitTerraform(content);
  expect(counts(plan)).toEqual({ add: 0, change: 0, destroy: 0, replace: 0, read: 0, noop: 0 });
});

test('the same document as TEXT is stored as it is, with no summary', async () => {
  const plan = ok(await submit({ content: fixture('create') })).submitPlan;
  expect(plan).toMatchObject({ contentType: 'TEXT', summary: null });
});

// proves: R31
test('the artifact travels with the plan: its base64 as submitted and the sha256 of its bytes', async () => {
  const artifact = planFileBase64(1);
  const bytes = Buffer.from(artifact, 'base64');
  const plan = await submitTerraform(fixture('update'), {
    artifact,
    sourceRevision: 'a1b2c3d',
    basedOnDeploymentSequence: 0,
  });
  expect(plan).toMatchObject({
    artifactHash: createHash('sha256').update(bytes).digest('hex'),
    sourceRevision: 'a1b2c3d',
    basedOnDeploymentSequence: 0,
  });
  expect(plan.artifact).toBeUndefined();
  expect(await read(plan.id)).toMatchObject({ artifact, artifactHash: plan.artifactHash });
});

test.each([
  [
    'with an artifact that is not base64',
    { artifact: 'not base64!', contentType: 'TERRAFORM_PLAN_JSON' },
    /base64/,
  ],
  ['with an artifact cut short', { artifact: 'QUJ', contentType: 'TERRAFORM_PLAN_JSON' }, /base64/],
  ['with an empty artifact', { artifact: '', contentType: 'TERRAFORM_PLAN_JSON' }, /artifact/],
  [
    'with an artifact over PLANFENCE_MAX_ARTIFACT_BYTES',
    { artifact: Buffer.alloc(1025).toString('base64'), contentType: 'TERRAFORM_PLAN_JSON' },
    /PLANFENCE_MAX_ARTIFACT_BYTES/,
  ],
  [
    'with an artifact on a TEXT plan',
    { artifact: 'QUJD', contentType: 'TEXT' },
    /TERRAFORM_PLAN_JSON/,
  ],
  [
    'with a sourceRevision of 256 characters',
    { sourceRevision: 'x'.repeat(256) },
    /sourceRevision/,
  ],
  [
    'with a negative basedOnDeploymentSequence',
    { basedOnDeploymentSequence: -1 },
    /deployment sequence/,
  ],
])(
  'a submit %s is refused with BAD_USER_INPUT',
  async (_, extra: Record<string, unknown>, message) => {
    const result = await submit({
      content: extra.contentType === 'TERRAFORM_PLAN_JSON' ? fixture('update') : 'text',
      ...extra,
    });
    expect(codeOf(result)).toBe('BAD_USER_INPUT');
    expect(result.errors![0].message).toMatch(message);
  },
);

test('exactly PLANFENCE_MAX_ARTIFACT_BYTES is accepted', async () => {
  const bytes = planFileOfSize(1024);
  const plan = await submitTerraform(fixture('noop'), { artifact: bytes.toString('base64') });
  expect(plan.artifactHash).toBe(createHash('sha256').update(bytes).digest('hex'));
});

/** A plan file of exactly `size` bytes: its tfplan entry stored (not deflated), of the length that makes it so. */
function planFileOfSize(size: number): Buffer {
  const build = (filler: number) =>
    planFile({ data: state() }, { name: 'filler', data: Buffer.alloc(filler, 7), method: 0 });
  const bytes = build(size - build(0).length);
  expect(bytes.length).toBe(size);
  return bytes;
}

// proves: R31
test('R31: a retried submit replays the first plan; another artifact under the same key is refused', async () => {
  const idempotencyKey = freshKey();
  const content = fixture('delete');
  const artifact = planFileBase64(4);
  const first = await submitTerraform(content, { idempotencyKey, artifact });
  const again = await submitTerraform(content, { idempotencyKey, artifact });
  expect(again.id).toBe(first.id);
  const other = await submit({
    content,
    contentType: 'TERRAFORM_PLAN_JSON',
    idempotencyKey,
    artifact: planFileBase64(5),
  });
  expect(codeOf(other)).toBe('IDEMPOTENCY_KEY_REUSED');
  const asText = await submit({ content, idempotencyKey, artifact: undefined });
  expect(codeOf(asText)).toBe('IDEMPOTENCY_KEY_REUSED');
});

// proves: R31
test('retention purges the artifact with the content; the summary and the hashes stay', async () => {
  const retained = await startApp({ PLANFENCE_PLAN_RETENTION_DAYS: '1' });
  try {
    const w = new World(retained);
    const a = await w.issue('a', 'AGENT');
    await w.createEnvironment('old', 'MONOTONIC');
    const g = await w.acquire(a, 'old');
    const plan = ok(
      await w.gql<{ submitPlan: TerraformPlan }>(
        a,
        `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${FIELDS} } }`,
        {
          input: {
            environment: 'old',
            generation: g,
            idempotencyKey: freshKey(),
            content: fixture('replace'),
            contentType: 'TERRAFORM_PLAN_JSON',
            artifact: planFileBase64(1),
          },
        },
      ),
    ).submitPlan;
    w.advance(2 * 86400);
    await retained.get(RetentionService).purge();
    const purged = ok(
      await w.gql<{ plan: TerraformPlan }>(
        w.admin,
        `query($id: ID!) { plan(id: $id) { ${ALL_FIELDS} } }`,
        {
          id: plan.id,
        },
      ),
    ).plan;
    expect(purged).toMatchObject({
      content: '',
      artifact: null,
      artifactHash: plan.artifactHash,
      contentHash: plan.contentHash,
      summary: plan.summary,
    });
  } finally {
    await retained.close();
  }
});

test('a worker hands back only the masked content and the summary when no plan policy reads the document: the same as the whole parse', async () => {
  const parser = new TerraformParser({ budgetMs: 20_000, workers: 1, budgetVariable: 'X' });
  try {
    for (const name of ['sensitive', 'mixed']) {
      const document = fixture(name);
      const whole = await parser.parse(document);
      const masked = await parser.parse(document, false);
      expect(Object.keys(masked).sort()).toEqual(['masked', 'summary']);
      expect(masked).toEqual({ masked: whole.masked, summary: whole.summary });
      expect(whole.document).toEqual(JSON.parse(whole.masked));
    }
  } finally {
    await parser.close();
  }
});
