/**
 * The container image (docs/containers.md), built from this checkout as `npm run image` builds
 * it (scripts/image.sh), on a base made FROM scratch with this machine's node binary and its
 * libraries, so that no registry is needed; then run: /health, the user, the read-only root,
 * its own HEALTHCHECK, secrets read from files, a plan that outlives a restart on the /data
 * volume, `docker stop` within 10 s, JSON on stdout, the command line in the same image, and
 * two containers on one PostgreSQL database, a plan published through one reaching a subscriber
 * of the other. The containers use the host's network (the PostgreSQL server listens on
 * loopback). Skipped, with the reason, where no Docker engine answers.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  linkSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { createPostgresDatabase } from './fault/service.js';
import {
  ADMIN_TOKEN,
  scratchDir,
  TEST_DATABASE,
  type GqlResult,
  type TestApp,
} from './support/app.js';
import { metric } from './support/metrics.js';
import { RawSocket } from './support/raw-socket.js';
import { subscribed } from './support/subscribed.js';
import { until } from './support/until.js';
import { ok, World } from './support/world.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
).version;
const IMAGE = 'planfence:dev';
const POSTGRES = process.env.PLANFENCE_TEST_POSTGRES_URL;

/** Why the image cannot be built and run here, or null when it can. */
function engineMissing(): string | null {
  // The image is the same whatever database a project runs the suites on.
  if (TEST_DATABASE !== 'sqlite') return 'runs once, in the sqlite project';
  const probe = spawnSync('docker', ['version', '--format', '{{.Server.Version}}'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  if (probe.error) return `docker: ${probe.error.message}`;
  if (probe.status !== 0)
    return `no Docker engine answers: ${probe.stderr.trim().split('\n').pop() ?? ''}`;
  return null;
}
const missing = engineMissing();
const withEngine = missing ? describe.skip : describe;
const withPostgres = POSTGRES ? test : test.skip;
const TERRAFORM = spawnSync('sh', ['-c', 'command -v terraform'], {
  encoding: 'utf8',
}).stdout.trim();
const withTerraform = TERRAFORM ? test : test.skip;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command; its exit code and output (it never throws for a non-zero exit). */
function run(
  file: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeout?: number } = {},
) {
  return new Promise<Run>((resolve) => {
    execFile(
      file,
      args,
      {
        cwd: ROOT,
        env: options.env ?? process.env,
        timeout: options.timeout ?? 60_000,
        maxBuffer: 64 << 20,
      },
      (error, stdout, stderr) =>
        resolve({
          code: error ? (typeof error.code === 'number' ? error.code : -1) : 0,
          stdout,
          stderr,
        }),
    );
  });
}
const docker = (...args: string[]) => run('docker', args);
async function dockerOk(...args: string[]): Promise<string> {
  const result = await docker(...args);
  if (result.code !== 0)
    throw new Error(`docker ${args.join(' ')}: exit ${result.code}\n${result.stderr}`);
  return result.stdout.trim();
}

/** A loopback port nothing listens on (the containers use the host's network). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The service in a container, spoken to over HTTP as the tests speak to an in-process one. */
function remote(url: string): TestApp {
  return {
    url,
    async gql<T>(token: string | null, query: string, variables: Record<string, unknown> = {}) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, variables }),
      });
      return { ...((await response.json()) as GqlResult<T>), status: response.status };
    },
  } as TestApp;
}

async function health(url: string): Promise<number | null> {
  try {
    return (await fetch(`${url}/health`)).status;
  } catch {
    return null;
  }
}
const healthy = (url: string, what: string) =>
  until(`${what}: /health 200`, async () => (await health(url)) === 200, { stallMs: 90_000 });

/** `promise`, or a failure naming `what` once `ms` have passed without it. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no ${what} within ${ms / 1000} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `work`; when it fails, the failure carries the last lines each container logged. */
async function withLogsOf(names: string[], work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    const logs = await Promise.all(
      names.map(async (name) => {
        const { stdout, stderr } = await docker('logs', '--tail', '40', name);
        return `--- ${name} ---\n${stdout}${stderr}`;
      }),
    );
    (error as Error).message += `\n${logs.join('\n')}`;
    throw error;
  }
}

const prefix = `planfence-test-${process.pid}`;
const containers: string[] = [];
const volumes: string[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

/** Starts a container of the image on the host's network, listening on `port`. */
async function start(name: string, port: number, args: string[]): Promise<string> {
  containers.push(name);
  await dockerOk(
    'run',
    '-d',
    '--name',
    name,
    '--network',
    'host',
    '-e',
    `PORT=${port}`,
    ...args,
    IMAGE,
  );
  return `http://127.0.0.1:${port}`;
}

afterAll(async () => {
  RawSocket.terminateAll();
  if (containers.length) await docker('rm', '-f', '-v', ...containers);
  if (volumes.length) await docker('volume', 'rm', '-f', ...volumes);
  for (const cleanup of cleanups) await cleanup();
}, 60_000);

// Jest lists no test of a file whose every test is skipped: the reason is printed.
if (missing) {
  process.stderr.write(`test/image.test.ts: skipped: ${missing}\n`);
  test.skip(`container image: skipped, ${missing}`, () => undefined);
}

withEngine('the container image', () => {
  /** What was measured, reported once the file ends. */
  const measured: Record<string, string> = {};
  afterAll(() => {
    if (Object.keys(measured).length)
      process.stderr.write(
        `image.test measurements: ${Object.entries(measured)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}\n`,
      );
  });

  beforeAll(async () => {
    // As `npm run image` builds it, on a base from this machine's node (no registry needed).
    const started = Date.now();
    const build = await run('bash', ['scripts/image.sh'], {
      env: { ...process.env, PLANFENCE_NODE_IMAGE: process.env.PLANFENCE_NODE_IMAGE ?? 'host' },
      timeout: 600_000,
    });
    if (build.code !== 0) throw new Error(`scripts/image.sh failed:\n${build.stderr.slice(-4000)}`);
    measured.build = `${((Date.now() - started) / 1000).toFixed(1)} s`;
  }, 660_000);

  test('tagged planfence:dev and planfence:<version>: not root, a /data volume, a HEALTHCHECK on /health', async () => {
    const [dev, versioned] = await Promise.all(
      [IMAGE, `planfence:${VERSION}`].map(
        async (tag) => JSON.parse(await dockerOk('image', 'inspect', tag))[0],
      ),
    );
    expect(versioned.Id).toBe(dev.Id);
    const config = dev.Config;
    expect(config.User).toBe('10001:10001');
    expect(Object.keys(config.Volumes)).toEqual(['/data']);
    expect(config.Healthcheck.Test.join(' ')).toContain('/health');
    expect(config.Entrypoint).toEqual([
      'node',
      '--max-semi-space-size=8',
      '--v8-pool-size=1',
      '/app/bin/planfence',
    ]);
    expect(config.Labels['org.opencontainers.image.version']).toBe(VERSION);
    measured.size = `${Math.round(dev.Size / 1e6)} MB`;
    expect(dev.Size).toBeLessThan(300e6);
  });

  describe('on SQLite, its database on a volume', () => {
    const name = `${prefix}-sqlite`;
    const volume = `${prefix}-data`;
    let url: string;
    let world: World;
    let planId: string;

    beforeAll(async () => {
      volumes.push(volume);
      // The admin token as a secret file (PLANFENCE_ENV_DIR), readable by the image's user.
      const secrets = scratchDir();
      cleanups.push(secrets.cleanup);
      chmodSync(secrets.path, 0o755);
      writeFileSync(join(secrets.path, 'PLANFENCE_ADMIN_TOKEN'), `${ADMIN_TOKEN}\n`, {
        mode: 0o644,
      });
      const port = await freePort();
      const started = Date.now();
      url = await start(name, port, [
        '--read-only',
        '-v',
        `${volume}:/data`,
        '-v',
        `${secrets.path}:/run/secrets:ro`,
        '-e',
        'PLANFENCE_ENV_DIR=/run/secrets',
        // The image's own HEALTHCHECK, run every second instead of every 30.
        '--health-interval',
        '1s',
        '--health-start-period',
        '0s',
      ]);
      await healthy(url, name);
      measured.start = `${((Date.now() - started) / 1000).toFixed(1)} s`;
      world = new World(remote(url));
    }, 120_000);

    test('serves /health as user 10001 on a read-only root file system; healthy by its own HEALTHCHECK; the admin token read from its secret file', async () => {
      expect(await (await fetch(`${url}/health`)).json()).toEqual({
        status: 'ok',
        database: 'sqlite',
      });
      const uid = await dockerOk(
        'exec',
        name,
        'node',
        '-p',
        "/^Uid:\\s+(\\d+)/m.exec(require('fs').readFileSync('/proc/1/status', 'utf8'))[1]",
      );
      expect(uid).toBe('10001');
      const write = await docker(
        'exec',
        name,
        'node',
        '-e',
        "require('fs').writeFileSync('/app/x', '')",
      );
      expect(write.code).not.toBe(0);
      expect(write.stderr).toContain('EROFS');
      await until(
        'the HEALTHCHECK to report healthy',
        async () =>
          (await dockerOk('inspect', '--format', '{{.State.Health.Status}}', name)) === 'healthy',
      );
      const whoami = ok(
        await world.gql<{ whoami: { name: string; role: string } }>(
          ADMIN_TOKEN,
          '{ whoami { name role } }',
        ),
      );
      expect(whoami.whoami).toEqual({ name: 'admin', role: 'ADMIN' });
    });

    test('a published plan outlives docker stop (within 10 s, exit 0, JSON on stdout) and start', async () => {
      const agent = await world.issue('agent', 'AGENT');
      await world.createEnvironment('prod', 'MONOTONIC', false);
      const generation = await world.acquire(agent, 'prod');
      const plan = await world.submitOk(agent, 'prod', generation, 'resource "x" {}');
      expect(plan.status).toBe('PUBLISHED');
      planId = plan.id;
      // Resident memory after that work: what the Deployment's memory request must cover.
      const rss = await metric(url, 'planfence_process_resident_memory_bytes');
      measured.rss = `${Math.round(rss / 2 ** 20)} MiB`;
      const deployment = parse(
        readFileSync(join(ROOT, 'deploy/kubernetes/base/deployment.yaml'), 'utf8'),
      );
      const request = /^(\d+)Mi$/.exec(
        deployment.spec.template.spec.containers[0].resources.requests.memory,
      )!;
      expect(rss).toBeLessThan(Number(request[1]) * 2 ** 20);

      const stopping = Date.now();
      await dockerOk('stop', name);
      const stopMs = Date.now() - stopping;
      measured.stop = `${(stopMs / 1000).toFixed(1)} s`;
      // Exit code 0: it stopped on SIGTERM, before docker's 10 s and its SIGKILL (137).
      expect(await dockerOk('inspect', '--format', '{{.State.ExitCode}}', name)).toBe('0');
      const logs = await docker('logs', name);
      const lines = logs.stdout.split('\n').filter(Boolean);
      const parsed = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
      expect(parsed.some((l) => l.msg.startsWith('listening on http://0.0.0.0:'))).toBe(true);
      expect(parsed.some((l) => l.msg.startsWith('SIGTERM: shutting down'))).toBe(true);
      expect(logs.stderr).toBe('');

      await dockerOk('start', name);
      await healthy(url, `${name} restarted`);
      expect(await world.plan(planId)).toMatchObject({ id: planId, status: 'PUBLISHED' });
      expect((await world.environment('prod')).currentPlan).toMatchObject({ id: planId });
    }, 120_000);

    test('the command line runs from the same image: docker run planfence:dev planfence env list', async () => {
      const cli = await docker(
        'run',
        '--rm',
        '--network',
        'host',
        '-e',
        `PLANFENCE_URL=${url}`,
        '-e',
        `PLANFENCE_TOKEN=${ADMIN_TOKEN}`,
        IMAGE,
        'planfence',
        'env',
        'list',
        '--json',
      );
      expect(cli.stderr).toBe('');
      expect(cli.code).toBe(0);
      expect(JSON.stringify(JSON.parse(cli.stdout))).toContain(planId);
    }, 60_000);
  });

  withTerraform(
    'the runner image (deploy/runner/Dockerfile): terraform beside the command line, no HEALTHCHECK',
    async () => {
      // A terraform image without a registry: this machine's (statically linked) binary, built
      // again only when the binary changed (its digest is a label).
      const binary = realpathSync(TERRAFORM);
      const digest = createHash('sha256').update(readFileSync(binary)).digest('hex');
      const label = '{{index .Config.Labels "planfence.terraform.sha256"}}';
      const built = await docker(
        'image',
        'inspect',
        '--format',
        label,
        'planfence-terraform:local',
      );
      if (built.stdout.trim() !== digest) {
        const dir = scratchDir();
        cleanups.push(dir.cleanup);
        try {
          linkSync(binary, join(dir.path, 'terraform'));
        } catch {
          copyFileSync(binary, join(dir.path, 'terraform'));
        }
        writeFileSync(
          join(dir.path, 'Dockerfile'),
          'FROM scratch\nCOPY terraform /bin/terraform\n',
        );
        await dockerOk(
          'build',
          '-q',
          '-t',
          'planfence-terraform:local',
          '--label',
          `planfence.terraform.sha256=${digest}`,
          dir.path,
        );
      }
      await dockerOk(
        'build',
        '-q',
        '-t',
        'planfence-runner:dev',
        '--build-arg',
        'TERRAFORM_IMAGE=planfence-terraform:local',
        '--build-arg',
        `PLANFENCE_IMAGE=${IMAGE}`,
        '-f',
        'deploy/runner/Dockerfile',
        'deploy/runner',
      );
      const config = JSON.parse(await dockerOk('image', 'inspect', 'planfence-runner:dev'))[0]
        .Config;
      expect(config.Healthcheck.Test).toEqual(['NONE']);
      expect(config.Cmd).toEqual(['runner', '--config', '/etc/planfence/runner.yaml']);
      const version = await docker(
        'run',
        '--rm',
        '--read-only',
        '--entrypoint',
        'terraform',
        'planfence-runner:dev',
        'version',
      );
      expect(version.stdout).toMatch(/^Terraform v\d+\.\d+/);
      const help = await docker('run', '--rm', 'planfence-runner:dev', 'runner', '--help');
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('Usage: planfence runner');
    },
    180_000,
  );

  withPostgres(
    'two containers on one PostgreSQL database: a plan published through one reaches a subscriber of the other',
    async () => {
      const database = await createPostgresDatabase(POSTGRES!, 'planfence_test');
      cleanups.push(database.drop);
      const [portA, portB] = [await freePort(), await freePort()];
      const env = [
        '-e',
        `DATABASE_URL=${database.url}`,
        '-e',
        `PLANFENCE_ADMIN_TOKEN=${ADMIN_TOKEN}`,
        '--read-only',
      ];
      // Started together: one migrates the new database while the other waits for it.
      const names = [`${prefix}-pg-a`, `${prefix}-pg-b`];
      const [a, b] = await Promise.all([start(names[0], portA, env), start(names[1], portB, env)]);
      await withLogsOf(names, async () => {
        await Promise.all([healthy(a, 'instance A'), healthy(b, 'instance B')]);
        expect(await (await fetch(`${b}/health`)).json()).toEqual({
          status: 'ok',
          database: 'postgres',
        });

        const onA = new World(remote(a));
        await onA.createEnvironment('prod', 'MONOTONIC', false);
        const agent = await onA.issue('agent', 'AGENT');
        const socket = await RawSocket.admitted(remote(b), ADMIN_TOKEN);
        await subscribed(b, 'planPublished', () =>
          socket.subscribe(
            'published',
            'subscription { planPublished(environment: "prod") { id status } }',
          ),
        );
        const generation = await onA.acquire(agent, 'prod');
        const plan = await onA.submitOk(agent, 'prod', generation, 'resource "y" {}');
        const frame = await within(
          30_000,
          `instance B's planPublished frame for ${plan.id}`,
          socket.next((f) => f.type === 'next' && f.id === 'published'),
        );
        expect(frame?.payload).toEqual({
          data: { planPublished: { id: plan.id, status: 'PUBLISHED' } },
        });
      });
    },
    180_000,
  );
});
