/** The `planfence` binary (dist/src/cli/main.js, built by `npm test`) against the real service. */
import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { Receiver } from './support/receiver.js';
import { ok, World } from './support/world.js';

const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

/** Each test runs the command line (or terraform) as processes, one after another: a loaded machine takes seconds each. */
jest.setTimeout(180_000);

let app: TestApp;
let world: World;
let agent: string;
let other: string;
let reviewer: string;
let viewer: string;
const dir = scratchDir();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function planfence(token: string | null, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token ?? '' };
    execFile(process.execPath, [BIN, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

const json = <T = any>(run: Run): T => {
  expect(run).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(run.stdout) as T;
};

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = await world.issue('agent', 'AGENT');
  other = await world.issue('other', 'AGENT');
  reviewer = await world.issue('reviewer', 'REVIEWER');
  viewer = await world.issue('viewer', 'VIEWER');
});
afterAll(async () => {
  await app.close();
  dir.cleanup();
});

test('--help lists the commands and the exit codes', async () => {
  const run = await planfence(null, '--help');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('plan submit ENV GENERATION --file PATH');
  expect(run.stdout).toContain('Exit codes');
});

test('an agent and a reviewer publish a plan, and scripts read --json', async () => {
  const created = json(
    await planfence(world.admin, 'env', 'create', 'cli-prod', '--mode', 'STRICT', '--json'),
  );
  expect(created).toMatchObject({
    name: 'cli-prod',
    mode: 'STRICT',
    requireApproval: true,
    fence: 0,
  });

  const lease = json(
    await planfence(agent, 'lease', 'acquire', 'cli-prod', '--ttl', '60', '--json'),
  );
  expect(lease).toMatchObject({ environment: 'cli-prod', holder: 'agent', generation: 1 });

  const file = join(dir.path, 'plan.txt');
  writeFileSync(file, 'resize web to 4 replicas\n');
  const plan = json(
    await planfence(
      agent,
      'plan',
      'submit',
      'cli-prod',
      '1',
      '--file',
      file,
      '--title',
      'resize',
      '--json',
    ),
  );
  expect(plan).toMatchObject({ id: 'cli-prod@1.1', status: 'PROPOSED', title: 'resize' });

  const approved = json(
    await planfence(reviewer, 'plan', 'approve', plan.id, '--hash', plan.contentHash, '--json'),
  );
  expect(approved.status).toBe('PUBLISHED');
  expect(json(await planfence(viewer, 'current', 'cli-prod', '--json')).id).toBe(plan.id);

  const human = await planfence(viewer, 'env', 'list');
  expect(human.code).toBe(0);
  expect(human.stdout).toMatch(/NAME\s+MODE\s+FENCE/);
  expect(human.stdout).toContain('cli-prod@1.1');

  const audit = json<{ action: string }[]>(await planfence(viewer, 'audit', 'cli-prod', '--json'));
  expect(audit.map((e) => e.action)).toEqual([
    'APPROVE_PLAN',
    'SUBMIT_PLAN',
    'ACQUIRE_LEASE',
    'CREATE_ENVIRONMENT',
  ]);
});

test('a file that cannot be read is bad input (exit code 2) that names the file', async () => {
  const missing = join(dir.path, 'no-such-plan.txt');
  for (const args of [
    ['plan', 'submit', 'cli-files', '1', '--file', missing],
    ['policy', 'test', 'cli-files', '--file', missing],
    ['login', '--oidc-token-file', missing],
  ]) {
    const run = await planfence(agent, ...args);
    expect({ args, code: run.code }).toEqual({ args, code: 2 });
    expect(run.stderr).toMatch(
      /^planfence: cannot read the (plan|OIDC token) file .*no-such-plan\.txt: ENOENT/,
    );
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  }
});

test('exit codes scripts can branch on, with one readable line on stderr', async () => {
  await world.createEnvironment('cli-codes', 'STRICT');
  const first = json(await planfence(agent, 'lease', 'acquire', 'cli-codes', '--json'))
    .generation as number;
  json(await planfence(agent, 'lease', 'acquire', 'cli-codes', '--json')); // a newer generation fences the first
  const file = join(dir.path, 'stale.txt');
  writeFileSync(file, 'old plan');

  const stale = await planfence(
    agent,
    'plan',
    'submit',
    'cli-codes',
    String(first),
    '--file',
    file,
  );
  expect(stale.code).toBe(5);
  expect(stale.stderr.trim().split('\n')).toHaveLength(1);
  expect(stale.stderr).toMatch(/^planfence: STALE_GENERATION: .*\(generation=1, fence=2\)/);

  const held = await planfence(other, 'lease', 'acquire', 'cli-codes');
  expect(held.code).toBe(6);
  expect(held.stderr).toContain('LEASE_HELD');

  expect((await planfence(viewer, 'lease', 'acquire', 'cli-codes')).code).toBe(3);
  expect((await planfence(viewer, 'plan', 'show', 'cli-codes@9.9')).code).toBe(4);
  expect((await planfence(viewer, 'env', 'show', 'nowhere')).code).toBe(4);
  expect((await planfence(agent, 'lease', 'acquire', 'BAD NAME')).code).toBe(2);
  expect((await planfence(agent, 'lease', 'renew', 'cli-codes', 'x')).code).toBe(2);
  expect((await planfence(agent, 'frobnicate')).code).toBe(2);
  expect((await planfence(null, 'env', 'list')).code).toBe(2);
  expect((await planfence('pf_wrong_token_000000', 'env', 'list')).code).toBe(3);
});

test('an unreachable service is exit code 8', async () => {
  const run = await new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      [BIN, 'env', 'list', '--url', 'http://127.0.0.1:9', '--token', 'x'],
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
  expect(run.code).toBe(8);
  expect(run.stderr).toContain('cannot reach');
});

// proves: R37
test('lease wait waits its turn in the queue and prints the granted generation', async () => {
  await world.createEnvironment('cli-queue', 'MONOTONIC');
  const held = json(await planfence(agent, 'lease', 'acquire', 'cli-queue', '--json'));
  const waiting = planfence(other, 'lease', 'wait', 'cli-queue', '--ttl', '60', '--json');
  // The release hands the lease to the waiter's ticket, whenever it was enqueued.
  for (;;) {
    const queue = ok(
      await app.gql<{ leaseQueue: unknown[] }>(
        world.admin,
        '{ leaseQueue(environment: "cli-queue") { id } }',
      ),
    ).leaseQueue;
    if (queue.length) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  json(await planfence(agent, 'lease', 'release', 'cli-queue', String(held.generation), '--json'));
  const granted = await waiting;
  // While it waited: a line on stderr, at once and every 5 s (on a loaded machine "at once"
  // may already read 1 s).
  expect(granted.stderr).toMatch(/^waiting for the lease on cli-queue: position 1, \d+ s\n/);
  expect(JSON.parse(granted.stdout)).toMatchObject({
    environment: 'cli-queue',
    holder: 'other',
    generation: held.generation + 1,
  });

  // A ticket that expires unserved is exit code 6.
  const expiring = planfence(agent, 'lease', 'wait', 'cli-queue', '--max-wait', '1');
  for (;;) {
    const queue = ok(
      await app.gql<{ leaseQueue: unknown[] }>(
        world.admin,
        '{ leaseQueue(environment: "cli-queue") { id } }',
      ),
    ).leaseQueue;
    if (queue.length) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  world.advance(1);
  const ended = await expiring;
  expect(ended.code).toBe(6);
  expect(ended.stderr).toMatch(/ended EXPIRED/);
});

test('--help lists every role and the token, lease and webhook commands', async () => {
  const run = await planfence(null, '--help');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('ADMIN, AGENT, REVIEWER, VIEWER, DEPLOYER');
  for (const command of [
    'token issue NAME ROLE [--group G ...] [--environments PATTERN,...] [--expires-in SECONDS]',
    'token rotate NAME',
    'token list',
    'lease cancel TICKET_ID',
    'webhook create URL --event EVENT',
    'webhook list',
    'webhook delete WEBHOOK_ID',
    'webhook deliveries WEBHOOK_ID',
    'webhook redeliver DELIVERY_ID',
  ])
    expect(run.stdout).toContain(command);
  expect(run.stdout).toContain('docs/cli.md');
});

test('a failure of every command family exits by the one table, with its code on stderr', async () => {
  await world.createEnvironment('cli-families', 'MONOTONIC');
  const file = join(dir.path, 'families.txt');
  writeFileSync(file, 'a plan');
  const cases: [string, string[], string, number][] = [
    [world.admin, ['token', 'rotate', 'nobody-here'], 'NOT_FOUND', 4],
    [world.admin, ['token', 'revoke', 'nobody-here'], 'NOT_FOUND', 4],
    [viewer, ['token', 'list'], 'FORBIDDEN', 3],
    [world.admin, ['token', 'issue', 'agent', 'AGENT'], 'ALREADY_EXISTS', 4],
    [viewer, ['env', 'show', 'nosuch'], 'NOT_FOUND', 4],
    [viewer, ['env', 'policy', 'nosuch'], 'NOT_FOUND', 4],
    [world.admin, ['env', 'unfreeze', 'nosuch'], 'NOT_FOUND', 4],
    [viewer, ['lease', 'acquire', 'cli-families'], 'FORBIDDEN', 3],
    [agent, ['lease', 'release', 'cli-families', '7'], 'UNKNOWN_GENERATION', 5],
    [agent, ['lease', 'cancel', '999999'], 'NOT_FOUND', 4],
    [viewer, ['plan', 'show', 'cli-families@9.9'], 'NOT_FOUND', 4],
    [agent, ['plan', 'submit', 'cli-families', '7', '--file', file], 'UNKNOWN_GENERATION', 5],
    [reviewer, ['plan', 'approve', 'cli-families@9.9'], 'NOT_FOUND', 4],
    [reviewer, ['policy', 'test', 'nosuch', '--file', file], 'NOT_FOUND', 4],
    [viewer, ['current', 'nosuch'], 'NOT_FOUND', 4],
    [viewer, ['audit', 'nosuch'], 'NOT_FOUND', 4],
    [viewer, ['deploy', 'show', 'prod#99'], 'NOT_FOUND', 4],
    [viewer, ['deploy', 'finish', 'cli-families#1', '--succeeded'], 'FORBIDDEN', 3],
    [world.admin, ['webhook', 'delete', '999999'], 'NOT_FOUND', 4],
    [world.admin, ['webhook', 'redeliver', '999999'], 'NOT_FOUND', 4],
    [viewer, ['webhook', 'list'], 'FORBIDDEN', 3],
  ];
  for (const [token, args, code, exit] of cases) {
    const run = await planfence(token, ...args);
    expect({ args, code: run.code, stderr: run.stderr.split(':')[1]?.trim() }).toEqual({
      args,
      code: exit,
      stderr: code,
    });
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  }
});

test('plan show prints the content hash, and a wrong --hash names the plan hash', async () => {
  await world.createEnvironment('cli-hash', 'MONOTONIC');
  const lease = json(await planfence(agent, 'lease', 'acquire', 'cli-hash', '--json'));
  const file = join(dir.path, 'hash.txt');
  writeFileSync(file, 'resize db\n');
  const plan = json(
    await planfence(
      agent,
      'plan',
      'submit',
      'cli-hash',
      String(lease.generation),
      '--file',
      file,
      '--json',
    ),
  );
  const shown = await planfence(viewer, 'plan', 'show', plan.id);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toContain(`content sha256 ${plan.contentHash}`);
  expect(shown.stdout).toContain(`plan approve ${plan.id} --hash ${plan.contentHash}`);
  // --json: every field of the plan; the plan file only with --artifact.
  const full = json(await planfence(viewer, 'plan', 'show', plan.id, '--json'));
  expect(full).toMatchObject({
    id: plan.id,
    content: 'resize db\n',
    contentType: 'TEXT',
    summary: null,
    approvals: [],
    pendingApprovalRules: [{ group: null, count: 1 }],
    policyResults: [],
    reviewUrl: `${app.url}/?plan=${encodeURIComponent(plan.id)}`,
  });
  expect(full).not.toHaveProperty('artifact');

  const wrong = 'f'.repeat(64);
  const refused = await planfence(reviewer, 'plan', 'approve', plan.id, '--hash', wrong);
  expect(refused.code).toBe(7);
  expect(refused.stderr).toContain('PRECONDITION_FAILED');
  expect(refused.stderr).toContain(
    `has content sha256 ${plan.contentHash}, not the reviewed ${wrong}`,
  );
  expect(refused.stderr).toContain(`expectedContentHash=${plan.contentHash}`);
  expect(refused.stderr).toContain(`reviewedContentHash=${wrong}`);

  const approved = json(
    await planfence(reviewer, 'plan', 'approve', plan.id, '--hash', plan.contentHash, '--json'),
  );
  expect(approved.status).toBe('PUBLISHED');
});

test('LEASE_HELD tells the same principal that the instance label is part of the holder', async () => {
  await world.createEnvironment('cli-instance', 'MONOTONIC');
  json(await planfence(agent, 'lease', 'acquire', 'cli-instance', '--instance', 'a', '--json'));
  const again = await planfence(agent, 'lease', 'acquire', 'cli-instance', '--instance', 'b');
  expect(again.code).toBe(6);
  expect(again.stderr).toContain('LEASE_HELD');
  expect(again.stderr).toContain(
    "the instance label is part of the holder's identity, so agent/b is not agent/a",
  );
  const bare = await planfence(agent, 'lease', 'acquire', 'cli-instance');
  expect(bare.code).toBe(6);
  expect(bare.stderr).toContain('so agent is not agent/a');
  // Another principal is simply told who holds it.
  const stranger = await planfence(other, 'lease', 'acquire', 'cli-instance', '--instance', 'a');
  expect(stranger.code).toBe(6);
  expect(stranger.stderr).toContain('is leased to agent/a');
  expect(stranger.stderr).not.toContain('instance label');
});

test('tokens: issue limited and expiring, list, rotate (the old secret stops), set groups', async () => {
  const issued = json(
    await planfence(
      world.admin,
      'token',
      'issue',
      'cli-deployer',
      'deployer',
      '--environments',
      'cli-*,staging',
      '--expires-in',
      '600',
      '--json',
    ),
  );
  expect(issued.principal).toMatchObject({
    name: 'cli-deployer',
    role: 'DEPLOYER',
    environments: ['cli-*', 'staging'],
  });
  expect(issued.principal.expiresAt).toEqual(expect.any(String));

  const listed = json<{ name: string; role: string }[]>(
    await planfence(world.admin, 'token', 'list', '--json'),
  );
  expect(listed).toContainEqual(
    expect.objectContaining({ name: 'cli-deployer', role: 'DEPLOYER' }),
  );
  expect((await planfence(world.admin, 'token', 'list')).stdout).toMatch(/NAME\s+ROLE\s+GROUPS/);

  const rotated = json(await planfence(world.admin, 'token', 'rotate', 'cli-deployer', '--json'));
  expect(rotated.token).not.toBe(issued.token);
  expect((await planfence(issued.token, 'env', 'list')).code).toBe(3);
  expect((await planfence(rotated.token, 'env', 'list')).code).toBe(0);

  const grouped = json(
    await planfence(world.admin, 'token', 'groups', 'cli-deployer', '--group', 'ops', '--json'),
  );
  expect(grouped.groups).toEqual(['ops']);
});

test('webhooks: create (the secret once), list, deliveries, delete', async () => {
  const created = json(
    await planfence(
      world.admin,
      'webhook',
      'create',
      'http://127.0.0.1:9/hook',
      '--event',
      'plan.submitted,plan.published',
      '--environments',
      'cli-*',
      '--json',
    ),
  );
  expect(created.secret).toEqual(expect.any(String));
  expect(created.webhook).toMatchObject({
    url: 'http://127.0.0.1:9/hook',
    events: ['plan.submitted', 'plan.published'],
    environments: ['cli-*'],
    format: 'JSON',
  });
  const id = created.webhook.id as string;
  const listed = json<{ id: string }[]>(await planfence(world.admin, 'webhook', 'list', '--json'));
  expect(listed.map((w) => w.id)).toContain(id);
  expect(
    Array.isArray(json(await planfence(world.admin, 'webhook', 'deliveries', id, '--json'))),
  ).toBe(true);
  expect((await planfence(world.admin, 'webhook', 'create', 'http://127.0.0.1:9/')).code).toBe(2);
  expect(json(await planfence(world.admin, 'webhook', 'delete', id, '--json'))).toEqual({
    deleted: true,
  });
  const after = json<{ id: string }[]>(await planfence(world.admin, 'webhook', 'list', '--json'));
  expect(after.map((w) => w.id)).not.toContain(id);
});

test('webhook redeliver: a delivered event is sent again, with the same delivery id', async () => {
  const receiver = new Receiver();
  await receiver.start();
  try {
    const created = json(
      await planfence(
        world.admin,
        'webhook',
        'create',
        receiver.url,
        '--event',
        'environment.frozen',
        '--environments',
        'cli-redeliver',
        '--json',
      ),
    );
    const hook = created.webhook.id as string;
    await world.createEnvironment('cli-redeliver', 'MONOTONIC');
    ok(
      await world.gql(
        world.admin,
        'mutation { freezeEnvironment(environment: "cli-redeliver", reason: "drill") { name } }',
      ),
    );
    let delivered: { id: string; status: string } | undefined;
    await Receiver.until(async () => {
      [delivered] = json<{ id: string; status: string }[]>(
        await planfence(world.admin, 'webhook', 'deliveries', hook, '--json'),
      );
      return delivered?.status === 'DELIVERED';
    }, 'the first delivery');
    const { id } = delivered!;

    expect(await planfence(world.admin, 'webhook', 'redeliver', id)).toEqual({
      code: 0,
      stdout: `delivery ${id} is PENDING again (event environment.frozen)\n`,
      stderr: '',
    });
    await Receiver.until(() => receiver.received.length === 2, 'the redelivery');
    expect(receiver.received.map((r) => [r.delivery, r.event])).toEqual([
      [id, 'environment.frozen'],
      [id, 'environment.frozen'],
    ]);
    // Only an ADMIN sends a delivery again.
    expect((await planfence(reviewer, 'webhook', 'redeliver', id)).code).toBe(3);
    json(await planfence(world.admin, 'webhook', 'delete', hook, '--json'));
  } finally {
    await receiver.stop();
  }
});
