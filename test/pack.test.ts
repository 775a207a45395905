/**
 * The package as users get it: `npm pack` of the built repository (dist/, built by
 * `npm test`), installed without the network by the install step of
 * examples/github-actions/planfence.yml into an empty folder, then used from plain
 * JavaScript (`planfence/client`, with its types), through `npx planfence` and by running
 * the examples as documented. Skipped where npm is missing.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { World } from './support/world.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const hasNpm = spawnSync('npm', ['--version'], { stdio: 'ignore' }).status === 0;
const withNpm = hasNpm ? describe : describe.skip;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command without blocking the service, which answers from this process. */
function run(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

/** The workflow's steps, by name or by their command's start. */
function workflowStep(match: string): string {
  const workflow = parseYaml(
    readFileSync(join(ROOT, 'examples/github-actions/planfence.yml'), 'utf8'),
  ) as {
    jobs: { plan: { steps: { name?: string; run?: string }[] } };
  };
  const step = workflow.jobs.plan.steps.find((s) => s.name === match || s.run?.startsWith(match));
  expect(step?.run).toBeDefined();
  return step!.run!;
}

withNpm('the packed package', () => {
  const dir = scratchDir();
  /** Where examples/github-actions/planfence.yml installs the package. */
  const runnerTemp = join(dir.path, 'runner');
  const installed = join(runnerTemp, 'planfence');
  const githubPath = join(dir.path, 'github-path');
  /** No network: npm answers from the package and its cache or fails; the registry goes nowhere. */
  const offline = {
    npm_config_offline: 'true',
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_ignore_scripts: 'true',
    npm_config_update_notifier: 'false',
  };
  let app: TestApp;
  let world: World;
  let tarball: string;

  beforeAll(async () => {
    app = await startApp();
    world = new World(app);
    const packed = await run(
      'npm',
      ['pack', '--ignore-scripts', '--pack-destination', dir.path],
      ROOT,
      offline,
    );
    expect(packed).toMatchObject({ code: 0 });
    const name = readdirSync(dir.path).find((file) => file.endsWith('.tgz'));
    expect(name).toBeDefined();
    tarball = join(dir.path, name!);
    mkdirSync(runnerTemp);
    // The workflow's own install step, as a runner runs it.
    const install = await run('bash', ['-e', '-c', workflowStep('install planfence')], dir.path, {
      ...offline,
      RUNNER_TEMP: runnerTemp,
      GITHUB_PATH: githubPath,
      PLANFENCE_PACKAGE: tarball,
    });
    if (install.code !== 0) console.error(install.stdout, install.stderr);
    expect(install.code).toBe(0);
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    dir.cleanup();
  });

  test('npx planfence --help answers from the installed package, and the workflow puts it on PATH', async () => {
    const help = await run('npx', ['--offline', 'planfence', '--help'], installed, offline);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('plan submit ENV GENERATION --file PATH');
    expect(help.stdout).toContain('Exit codes');
    const bin = readFileSync(githubPath, 'utf8').trim();
    expect(bin).toBe(join(installed, 'node_modules/.bin'));
    const onPath = await run('planfence', ['--help'], dir.path, {
      PATH: `${bin}:${process.env.PATH}`,
    });
    expect(onPath).toMatchObject({ code: 0, stdout: help.stdout });
  });

  test('npm install -g of the tarball puts planfence on PATH: --version and env list against the service', async () => {
    const prefix = join(dir.path, 'global');
    const installed = await run(
      'npm',
      ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', tarball],
      dir.path,
      offline,
    );
    if (installed.code !== 0) console.error(installed.stdout, installed.stderr);
    expect(installed.code).toBe(0);
    const PATH = `${join(prefix, 'bin')}:${process.env.PATH}`;
    const version = await run('planfence', ['--version'], dir.path, { PATH });
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(version).toMatchObject({ code: 0, stdout: `planfence ${pkg.version}\n`, stderr: '' });
    await world.createEnvironment('globally', 'MONOTONIC');
    const token = await world.issue('global-viewer', 'VIEWER');
    const list = await run('planfence', ['env', 'list', '--json'], dir.path, {
      PATH,
      PLANFENCE_URL: app.url,
      PLANFENCE_TOKEN: token,
    });
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect((JSON.parse(list.stdout) as { name: string }[]).map((e) => e.name)).toContain(
      'globally',
    );
  });

  test('plain JavaScript imports planfence/client and talks to the service', async () => {
    const token = await world.issue('packed', 'VIEWER');
    writeFileSync(
      join(installed, 'whoami.mjs'),
      [
        "import { PlanfenceClient, PlanfenceError } from 'planfence/client';",
        'const client = new PlanfenceClient({ url: process.env.PLANFENCE_URL, token: process.env.PLANFENCE_TOKEN });',
        'const me = await client.whoami();',
        'console.log(JSON.stringify({ name: me.name, role: me.role, errors: typeof PlanfenceError }));',
      ].join('\n'),
    );
    const result = await run(process.execPath, ['whoami.mjs'], installed, {
      PLANFENCE_URL: app.url,
      PLANFENCE_TOKEN: token,
    });
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual({
      name: 'packed',
      role: 'VIEWER',
      errors: 'function',
    });
  });

  test('the client ships its types', async () => {
    writeFileSync(
      join(installed, 'typed.mts'),
      [
        "import { PlanfenceClient, type Plan } from 'planfence/client';",
        "const client = new PlanfenceClient({ url: 'http://127.0.0.1:4000', token: '' });",
        'export const submitted: Promise<Plan> = client.submitPlan({',
        "  environment: 'prod', generation: 1, content: 'x',",
        '});',
        '// @ts-expect-error: the generation is a number',
        "client.submitPlan({ environment: 'prod', generation: 'one', content: 'x' });",
      ].join('\n'),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(
      process.execPath,
      [
        tsc,
        '--noEmit',
        '--strict',
        '--skipLibCheck',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--types',
        'node',
        '--typeRoots',
        join(ROOT, 'node_modules/@types'),
        'typed.mts',
      ],
      installed,
    );
    expect(checked).toMatchObject({ code: 0, stdout: '' });
  });

  test('the agent example runs as documented against the service', async () => {
    await world.createEnvironment('prod', 'MONOTONIC');
    const token = await world.issue('example-agent', 'AGENT');
    const example = await run(
      process.execPath,
      ['node_modules/planfence/dist/examples/agent.js'],
      installed,
      { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token },
    );
    expect(example).toMatchObject({ code: 0, stderr: '' });
    expect(example.stdout).toMatch(/^submitted \S+ \(PROPOSED\)\n$/);
    const plans = await world.plans('prod');
    expect(plans).toHaveLength(1);
    expect(example.stdout).toContain(plans[0].id);
  });

  test("the workflow's client step runs the package's example with plain node", async () => {
    // Outside GitHub Actions there is no OIDC token to exchange: the example says so.
    const env: Record<string, string> = { RUNNER_TEMP: runnerTemp, PLANFENCE_URL: app.url };
    const step = await run('bash', ['-e', '-c', workflowStep('node ')], dir.path, {
      ...env,
      ACTIONS_ID_TOKEN_REQUEST_URL: '',
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: '',
    });
    expect(step.code).toBe(1);
    expect(step.stderr).toContain('no GitHub Actions OIDC token available');
  });
});
