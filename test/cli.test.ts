/** The `planfence` binary (dist/src/cli/main.js, built by `npm test`) against the real service. */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { ok, World } from './support/world.js';

const BIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

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
  expect(json(await waiting)).toMatchObject({
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
