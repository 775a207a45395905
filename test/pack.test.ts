/**
 * The package as users get it: `npm pack` of the built repository (dist/, built by
 * `npm test`), installed into an empty folder without the network, then used from plain
 * JavaScript (`planfence/client`, with its types), through `npx planfence` and by running
 * an example against the real service. Skipped where npm is missing.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

withNpm('the packed package', () => {
  const dir = scratchDir();
  const app_ = join(dir.path, 'app');
  /** No network: npm answers from its cache or fails; the registry address goes nowhere. */
  const offline = {
    npm_config_offline: 'true',
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
  let app: TestApp;
  let world: World;

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
    const tarball = readdirSync(dir.path).find((name) => name.endsWith('.tgz'));
    expect(tarball).toBeDefined();
    mkdirSync(app_);
    writeFileSync(
      join(app_, 'package.json'),
      JSON.stringify({ name: 'uses-planfence', private: true, type: 'module' }),
    );
    const installed = await run(
      'npm',
      ['install', '--ignore-scripts', join(dir.path, tarball!)],
      app_,
      offline,
    );
    if (installed.code !== 0) console.error(installed.stdout, installed.stderr);
    expect(installed.code).toBe(0);
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    dir.cleanup();
  });

  test('npx planfence --help answers from the installed package', async () => {
    const help = await run('npx', ['--offline', 'planfence', '--help'], app_, offline);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('plan submit ENV GENERATION --file PATH');
    expect(help.stdout).toContain('Exit codes');
  });

  test('plain JavaScript imports planfence/client and talks to the service', async () => {
    const token = await world.issue('packed', 'VIEWER');
    writeFileSync(
      join(app_, 'whoami.mjs'),
      [
        "import { PlanfenceClient, PlanfenceError } from 'planfence/client';",
        'const client = new PlanfenceClient({ url: process.env.PLANFENCE_URL, token: process.env.PLANFENCE_TOKEN });',
        'const me = await client.whoami();',
        'console.log(JSON.stringify({ name: me.name, role: me.role, errors: typeof PlanfenceError }));',
      ].join('\n'),
    );
    const result = await run(process.execPath, ['whoami.mjs'], app_, {
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
      join(app_, 'typed.ts'),
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
        'typed.ts',
      ],
      app_,
    );
    expect(checked).toMatchObject({ code: 0, stdout: '' });
  });

  test('the agent example runs as documented against the service', async () => {
    await world.createEnvironment('prod', 'MONOTONIC');
    const token = await world.issue('example-agent', 'AGENT');
    const example = await run(
      process.execPath,
      ['node_modules/planfence/dist/examples/agent.js'],
      app_,
      { PLANFENCE_URL: app.url, PLANFENCE_TOKEN: token },
    );
    expect(example).toMatchObject({ code: 0, stderr: '' });
    expect(example.stdout).toMatch(/^submitted \S+ \(PROPOSED\)\n$/);
    const plans = await world.plans('prod');
    expect(plans).toHaveLength(1);
    expect(example.stdout).toContain(plans[0].id);
  });
});
