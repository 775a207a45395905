/**
 * Storage safety, as an unlucky operator meets it: a second process on the same SQLite
 * file, the database deleted under the running service, a full disk, a read-only file,
 * and a restore from a backup that must never issue a generation again.
 *
 * The service runs as a real child process (the built dist/src/main.js) where a second
 * process or a file-system fault is needed, or where the test reads how a start fails (its
 * exit code and stderr); elsewhere it runs in the test process, over HTTP on the same file.
 * The restore and backup commands run as the operator runs them.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { distFile, freePort } from '../fault/service.js';
import {
  ADMIN_TOKEN,
  codeOf,
  ok,
  scratchDatabase,
  scratchDir,
  startApp,
  TEST_DATABASE,
  type GqlResult,
  type TestApp,
} from '../support/app.js';

/** What a test asks of a running service, over HTTP as the admin. */
abstract class Running {
  abstract readonly url: string;
  abstract readonly pid: number;
  abstract stop(): Promise<void>;

  health(): Promise<Response> {
    return fetch(`${this.url}/health`);
  }

  async gql<T = Record<string, any>>(
    query: string,
    variables: Record<string, unknown> = {},
  ): Promise<GqlResult<T>> {
    const response = await fetch(`${this.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ query, variables }),
    });
    return { ...((await response.json()) as GqlResult<T>), status: response.status };
  }

  createEnvironment(name: string) {
    return this.gql(
      `mutation($name: String!) { createEnvironment(input: { name: $name, mode: MONOTONIC }) { name } }`,
      { name },
    );
  }

  async acquire(environment: string): Promise<number> {
    const data = ok(
      await this.gql<{ acquireLease: { generation: number } }>(
        `mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 3600 }) { generation } }`,
        { e: environment },
      ),
    );
    return data.acquireLease.generation;
  }

  submit(environment: string, generation: number, content: string, key: string) {
    return this.gql(`mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }`, {
      input: { environment, generation, content, idempotencyKey: key },
    });
  }
}

/**
 * The service started in this test process on one SQLite file (the same start-up as the
 * built service's, the same lock, marker and file checks), where the test needs no second
 * process: starting the built service takes seconds of CPU on a busy machine.
 */
class InProcess extends Running {
  readonly pid = process.pid;

  private constructor(private readonly app: TestApp) {
    super();
  }

  get url(): string {
    return this.app.url;
  }

  static async start(file: string, env: Record<string, string> = {}): Promise<InProcess> {
    return new InProcess(await startApp({ DATABASE_URL: `sqlite:${file}`, ...env }));
  }

  stop(): Promise<void> {
    return this.app.close();
  }
}

/** The built service as a child process on one SQLite file; its output is kept. */
class Service extends Running {
  readonly child: ChildProcess;
  readonly url: string;
  stdout = '';
  stderr = '';
  readonly exited: Promise<number | null>;

  private constructor(file: string, port: number, env: Record<string, string>) {
    super();
    this.url = `http://127.0.0.1:${port}`;
    this.child = spawn(process.execPath, [distFile('src/main.js')], {
      env: {
        ...process.env,
        PORT: String(port),
        DATABASE_URL: `sqlite:${file}`,
        PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (chunk: Buffer) => (this.stdout += chunk.toString()));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Starts the service; resolves once it answers /health (any status) or has exited. */
  static async start(file: string, env: Record<string, string> = {}): Promise<Service> {
    const service = new Service(file, await freePort(), env);
    let exited = false;
    void service.exited.then(() => (exited = true));
    for (let i = 0; i < 600 && !exited; i++) {
      try {
        await fetch(`${service.url}/health`);
        return service;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return service;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }
}

/** Polls `condition` (a state the service must reach on its own, e.g. after its file check). */
async function eventually(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
}

const onSqlite = TEST_DATABASE === 'sqlite' ? describe : describe.skip;

test.each([
  ['PLANFENCE_INIT_DATABASE', 'yes'],
  ['PLANFENCE_STORAGE_CHECK_MS', '10'],
  ['PLANFENCE_STORAGE_CHECK_MS', 'often'],
])('a bad %s (%s) stops the start with a message naming it', (variable, value) => {
  expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
  expect(() => loadConfig({ [variable]: value })).toThrow(variable);
});

test('the storage defaults: no initialisation of a missing database, a file check every second, a failed write on /health for a minute', () => {
  expect(loadConfig({}).storage).toEqual({
    initialize: false,
    checkIntervalMs: 1000,
    writeFailureMs: 60_000,
  });
  expect(loadConfig({ PLANFENCE_INIT_DATABASE: '1' }).storage.initialize).toBe(true);
});

onSqlite('one SQLite file, one process', () => {
  let dir: { path: string; cleanup: () => void };
  let first: Running;
  beforeAll(async () => {
    dir = scratchDir();
    first = await InProcess.start(join(dir.path, 'planfence.db'));
    expect((await first.health()).status).toBe(200);
  });
  afterAll(async () => {
    await first.stop();
    dir.cleanup();
  });

  test('a second process on the same file exits non-zero, naming the holder, before loading the application; the first serves on', async () => {
    const second = await Service.start(join(dir.path, 'planfence.db'));
    const code = await second.exited;

    expect(code).not.toBe(0);
    expect(second.stderr).toContain(`in use by process ${first.pid}`);
    // Refused before the application's modules were loaded: no logger was set up, so the
    // one line on stderr is all it says (an application that starts logs its errors too).
    expect(second.stdout).toBe('');
    expect(second.stderr.trim().split('\n')).toHaveLength(1);
    expect(codeOf(await first.createEnvironment('still-serving'))).toBe('OK');
    expect((await first.health()).status).toBe(200);
  });

  test('the database, its WAL and shared-memory files, the lock and the id marker are readable by their owner only', async () => {
    expect(codeOf(await first.createEnvironment('modes'))).toBe('OK');
    const base = join(dir.path, 'planfence.db');
    for (const file of [base, `${base}-wal`, `${base}-shm`, `${base}.lock`, `${base}.id`]) {
      expect([file, statSync(file).mode & 0o777]).toEqual([file, 0o600]);
    }
  });

  test('three processes started at once on a new file: one serves, the others exit naming it', async () => {
    const other = scratchDir();
    const file = join(other.path, 'planfence.db');
    const services = await Promise.all([1, 2, 3].map(() => Service.start(file)));
    try {
      const healthy: Service[] = [];
      for (const service of services) {
        const answer = await service.health().catch(() => null);
        if (answer?.status === 200) healthy.push(service);
      }
      expect(healthy).toHaveLength(1);
      const [holder] = healthy;
      for (const loser of services.filter((s) => s !== holder)) {
        expect(await loser.exited).not.toBe(0);
        expect(loser.stderr).toContain(`in use by process ${holder.pid}`);
      }
    } finally {
      await Promise.all(services.map((s) => s.stop()));
      other.cleanup();
    }
  });

  test('a process that was killed leaves no lock behind: the next start takes over', async () => {
    const other = scratchDir();
    try {
      const file = join(other.path, 'planfence.db');
      const crashed = await Service.start(file);
      expect((await crashed.health()).status).toBe(200);
      crashed.child.kill('SIGKILL');
      await crashed.exited;

      const next = await InProcess.start(file);
      try {
        expect((await next.health()).status).toBe(200);
        expect(codeOf(await next.createEnvironment('after-crash'))).toBe('OK');
      } finally {
        await next.stop();
      }
    } finally {
      other.cleanup();
    }
  });
});

onSqlite('the database file deleted under the running service', () => {
  test('writes are refused with STORAGE_UNAVAILABLE and /health says 503; a restart refuses to create an empty database unless told to', async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'planfence.db');
    try {
      const service = await Service.start(file);
      expect(codeOf(await service.createEnvironment('prod'))).toBe('OK');
      for (let i = 0; i < 4; i++) await service.acquire('prod');

      unlinkSync(file);
      await eventually(async () => (await service.health()).status === 503, '/health 503');
      const body = (await (await service.health()).json()) as { reason: string };
      expect(body.reason).toMatch(/deleted/);
      const refused = await service.createEnvironment('after-delete');
      expect(codeOf(refused)).toBe('STORAGE_UNAVAILABLE');
      expect(refused.errors![0].message).toMatch(/^storage unavailable/);
      expect(refused.errors![0].message).not.toContain(dir.path);
      const lease = await service.gql(
        `mutation { acquireLease(input: { environment: "prod", ttlSeconds: 60 }) { generation } }`,
      );
      expect(codeOf(lease)).toBe('STORAGE_UNAVAILABLE');
      await service.stop();

      const restarted = await Service.start(file);
      expect(await restarted.exited).not.toBe(0);
      expect(restarted.stderr).toMatch(/is missing, but this folder held one/);
      expect(restarted.stderr).toContain('PLANFENCE_INIT_DATABASE=1');
      expect(existsSync(file)).toBe(false);

      const initialized = await InProcess.start(file, { PLANFENCE_INIT_DATABASE: '1' });
      try {
        expect((await initialized.health()).status).toBe(200);
        const prod = await initialized.gql(`{ environment(name: "prod") { name } }`);
        expect(prod.data?.environment ?? null).toBeNull();
      } finally {
        await initialized.stop();
      }
      // The new database is now the folder's: later starts need no flag.
      const again = await InProcess.start(file);
      try {
        expect((await again.health()).status).toBe(200);
      } finally {
        await again.stop();
      }
    } finally {
      dir.cleanup();
    }
  });

  test('a database file replaced by another database is refused at start', async () => {
    const dir = scratchDir();
    const other = scratchDir();
    try {
      const file = join(dir.path, 'planfence.db');
      const elsewhere = join(other.path, 'planfence.db');
      for (const path of [file, elsewhere]) {
        const service = await InProcess.start(path);
        expect((await service.health()).status).toBe(200);
        await service.stop();
      }
      for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
      execFileSync('cp', [elsewhere, file]);

      const refused = await Service.start(file);
      expect(await refused.exited).not.toBe(0);
      expect(refused.stderr).toMatch(/is not the database this folder held/);
    } finally {
      dir.cleanup();
      other.cleanup();
    }
  });
});

/** A small tmpfs of its own, when this process may mount one (root on Linux); else null. */
function smallFileSystem(megabytes: number): { path: string; cleanup: () => void } | null {
  const path = mkdtempSync(join(tmpdir(), 'planfence-small-fs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m,mode=0700`, 'tmpfs', path], {
      stdio: 'ignore',
    });
  } catch {
    rmSync(path, { recursive: true, force: true });
    return null;
  }
  return {
    path,
    cleanup: () => {
      spawnSync('umount', [path]);
      rmSync(path, { recursive: true, force: true });
    },
  };
}

const canMount = TEST_DATABASE === 'sqlite' ? smallFileSystem(1) : null;
canMount?.cleanup();
if (TEST_DATABASE === 'sqlite' && !canMount) {
  console.warn(
    'storage.test.ts: the disk-full case is SKIPPED: this process cannot mount a small tmpfs (needs root on Linux)',
  );
}

(canMount ? describe : describe.skip)('a full disk', () => {
  test('writes fail with STORAGE_UNAVAILABLE and /health says 503; once space returns writes succeed and /health says 200', async () => {
    const fs = smallFileSystem(8)!;
    // An 8 MiB file system never has the room the largest allowed write needs (the default
    // PLANFENCE_STORAGE_MIN_FREE_BYTES): this case is about writes failing and coming back.
    const service = await Service.start(join(fs.path, 'planfence.db'), {
      PLANFENCE_STORAGE_MIN_FREE_BYTES: String(1024 * 1024),
    });
    try {
      expect(codeOf(await service.createEnvironment('prod'))).toBe('OK');
      const generation = await service.acquire('prod');

      // Fill what is left of the file system.
      const filler = join(fs.path, 'filler');
      const chunk = Buffer.alloc(64 * 1024, 1);
      mkdirSync(filler);
      try {
        for (let i = 0; ; i++) writeFileSync(join(filler, String(i)), chunk);
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
      }

      const content = 'x'.repeat(200 * 1024);
      const codes: string[] = [];
      for (let i = 0; i < 40 && !codes.includes('STORAGE_UNAVAILABLE'); i++) {
        codes.push(codeOf(await service.submit('prod', generation, content, `full-${i}`)));
      }
      expect(codes).toContain('STORAGE_UNAVAILABLE');
      expect(codes.filter((c) => c !== 'OK' && c !== 'STORAGE_UNAVAILABLE')).toEqual([]);
      const health = await service.health();
      expect(health.status).toBe(503);
      expect(((await health.json()) as { reason: string }).reason).toMatch(/disk is full/);

      rmSync(filler, { recursive: true, force: true });
      // /health speaks for the clients' writes: 503 until one of them commits again.
      expect((await service.health()).status).toBe(503);
      expect(codeOf(await service.submit('prod', generation, content, 'after-space'))).toBe('OK');
      expect((await service.health()).status).toBe(200);
    } finally {
      await service.stop();
      fs.cleanup();
    }
  });
});

/** Makes `file` read-only even for root (the immutable attribute), or for its owner otherwise. */
function makeReadOnly(file: string): (() => void) | null {
  if (process.getuid?.() !== 0) {
    execFileSync('chmod', ['0400', file]);
    return () => execFileSync('chmod', ['0600', file]);
  }
  const result = spawnSync('chattr', ['+i', file]);
  if (result.status !== 0) return null;
  return () => spawnSync('chattr', ['-i', file]);
}

/** Whether this machine lets the test make a file read-only (root needs chattr, which some file systems refuse). */
function canMakeReadOnly(): boolean {
  const dir = scratchDir();
  try {
    const file = join(dir.path, 'probe');
    writeFileSync(file, '');
    const undo = makeReadOnly(file);
    undo?.();
    return undo != null;
  } finally {
    dir.cleanup();
  }
}

onSqlite('a read-only database file', () => {
  // Where it cannot run, jest reports the case skipped.
  (canMakeReadOnly() ? test : test.skip)(
    '/health says 503 and writes fail with STORAGE_UNAVAILABLE, while reads are served',
    async () => {
      const dir = scratchDir();
      const file = join(dir.path, 'planfence.db');
      let undo: (() => void) | null = null;
      try {
        const writable = await InProcess.start(file);
        expect(codeOf(await writable.createEnvironment('prod'))).toBe('OK');
        await writable.stop();
        undo = makeReadOnly(file);
        if (!undo) throw new Error(`could not make ${file} read-only`);

        const service = await Service.start(file);
        try {
          const health = await service.health();
          expect(health.status).toBe(503);
          expect(((await health.json()) as { reason: string }).reason).toMatch(/read-only/);
          expect(codeOf(await service.createEnvironment('stage'))).toBe('STORAGE_UNAVAILABLE');
          const prod = await service.gql(`{ environment(name: "prod") { name } }`);
          expect(prod.data?.environment).toEqual({ name: 'prod' });
        } finally {
          await service.stop();
        }
      } finally {
        undo?.();
        dir.cleanup();
      }
    },
  );
});

/** Runs the restore command as an operator does; returns its exit code and output. */
function restore(database: string, ...args: string[]) {
  const result = spawnSync(process.execPath, [distFile('src/cli/restore.js'), ...args], {
    env: { ...process.env, DATABASE_URL: database, LOG_LEVEL: 'error' },
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

onSqlite('backing up a running service', () => {
  // proves: R1
  test('a backup taken while the service runs, restored after the file was lost, with the margin: no generation handed out after the backup is issued again', async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'planfence.db');
    const copy = join(dir.path, 'backup.db');
    try {
      const service = await InProcess.start(file);
      expect(codeOf(await service.createEnvironment('prod'))).toBe('OK');
      expect(await service.acquire('prod')).toBe(1);
      expect(await service.acquire('prod')).toBe(2);

      const backup = spawnSync(
        process.execPath,
        [distFile('src/cli/backup.js'), '--database', `sqlite:${file}`, '--to', copy],
        { encoding: 'utf8' },
      );
      expect([backup.status, backup.stderr]).toEqual([0, '']);
      expect(statSync(copy).mode & 0o777).toBe(0o600);
      // Handed out after the backup, then the database is lost.
      expect(await service.acquire('prod')).toBe(3);
      expect(await service.acquire('prod')).toBe(4);
      await service.stop();
      for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });

      // The documented procedure: put the copy in place, raise by a margin, start.
      execFileSync('cp', [copy, file]);
      const raised = restore(`sqlite:${file}`, '--margin', '1000');
      expect(raised.code).toBe(0);
      expect(raised.stdout).toContain('prod: last issued generation 1002, fence 1002');
      const restored = await InProcess.start(file);
      try {
        expect((await restored.health()).status).toBe(200);
        expect(await restored.acquire('prod')).toBe(1003);
      } finally {
        await restored.stop();
      }
    } finally {
      dir.cleanup();
    }
  });
});

describe('restoring a backup', () => {
  const QUERY_ENV = `query($n: String!) { environment(name: $n) { fence lastIssuedGeneration } }`;

  // proves: R1
  test('the restore margin raises every counter and fence, so no generation handed out is issued again', async () => {
    const database = await scratchDatabase(true);
    try {
      const before = await startApp({ DATABASE_URL: database.url });
      const gql = before.gql.bind(before);
      for (const name of ['prod', 'stage']) {
        ok(
          await gql(
            ADMIN_TOKEN,
            `mutation($n: String!) { createEnvironment(input: { name: $n, mode: MONOTONIC }) { name } }`,
            { n: name },
          ),
        );
      }
      const acquire = async (app: typeof before, environment: string) =>
        ok(
          await app.gql<{ acquireLease: { generation: number } }>(
            ADMIN_TOKEN,
            `mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 3600 }) { generation } }`,
            { e: environment },
          ),
        ).acquireLease.generation;
      for (let i = 0; i < 4; i++) await acquire(before, 'prod');
      ok(
        await gql(
          ADMIN_TOKEN,
          `mutation { submitPlan(input: { environment: "prod", generation: 4, content: "at 4", idempotencyKey: "k4" }) { id } }`,
        ),
      );
      const old = ok(
        await gql<{ environment: { fence: number } }>(ADMIN_TOKEN, QUERY_ENV, { n: 'prod' }),
      );
      expect(old.environment).toEqual({ fence: 4, lastIssuedGeneration: 4 });

      if (TEST_DATABASE === 'sqlite') {
        // The service holds the file: the restore waits for it to stop.
        const refused = restore(database.url, '--margin', '100');
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain(`in use by process ${process.pid}`);
      }
      await before.close();

      expect(restore(database.url).code).toBe(2);
      expect(restore(database.url, '--margin', '0').code).toBe(2);
      expect(restore(database.url, '--margin', '2147483645').code).toBe(2);

      const done = restore(database.url, '--margin', '100');
      expect(done.stderr).toBe('');
      expect(done.code).toBe(0);
      expect(done.stdout).toContain('prod: last issued generation 104, fence 104');
      expect(done.stdout).toContain('raised 2 environment(s) by 100');

      const after = await startApp({ DATABASE_URL: database.url });
      try {
        const raised = ok(await after.gql(ADMIN_TOKEN, QUERY_ENV, { n: 'prod' }));
        expect(raised.environment).toEqual({ fence: 104, lastIssuedGeneration: 104 });
        expect(ok(await after.gql(ADMIN_TOKEN, QUERY_ENV, { n: 'stage' })).environment).toEqual({
          fence: 100,
          lastIssuedGeneration: 100,
        });
        const next = await acquire(after, 'prod');
        expect(next).toBeGreaterThan(104);
        // A plan made under a generation from before the restore is fenced off.
        const stale = await after.gql(
          ADMIN_TOKEN,
          `mutation { submitPlan(input: { environment: "prod", generation: 4, content: "late", idempotencyKey: "late" }) { id } }`,
        );
        expect(codeOf(stale)).toBe('STALE_GENERATION');
        const audit = ok(
          await after.gql<{ auditEvents: { action: string; generation: number; actor: string }[] }>(
            ADMIN_TOKEN,
            `{ auditEvents(environment: "prod", first: 10) { action generation actor } }`,
          ),
        );
        expect(audit.auditEvents).toContainEqual(
          expect.objectContaining({ action: 'RESTORE_MARGIN', generation: 104 }),
        );
      } finally {
        await after.close();
      }
    } finally {
      await database.cleanup();
    }
  });

  // proves: R1, R3
  test('a second restore raises again, and the STRICT fence only ever moves up with the counter', async () => {
    const database = await scratchDatabase(true);
    try {
      const app = await startApp({ DATABASE_URL: database.url });
      ok(
        await app.gql(
          ADMIN_TOKEN,
          `mutation { createEnvironment(input: { name: "strict", mode: STRICT }) { name } }`,
        ),
      );
      for (let i = 0; i < 3; i++) {
        ok(
          await app.gql(
            ADMIN_TOKEN,
            `mutation { acquireLease(input: { environment: "strict", ttlSeconds: 3600 }) { generation } }`,
          ),
        );
      }
      await app.close();

      expect(restore(database.url, '--margin', '1').code).toBe(0);
      expect(restore(database.url, '--margin', '1').code).toBe(0);
      const after = await startApp({ DATABASE_URL: database.url });
      try {
        const env = ok(await after.gql(ADMIN_TOKEN, QUERY_ENV, { n: 'strict' }));
        expect(env.environment).toEqual({ fence: 5, lastIssuedGeneration: 5 });
        const next = ok(
          await after.gql<{ acquireLease: { generation: number } }>(
            ADMIN_TOKEN,
            `mutation { acquireLease(input: { environment: "strict", ttlSeconds: 60 }) { generation } }`,
          ),
        );
        expect(next.acquireLease.generation).toBe(6);
      } finally {
        await after.close();
      }

      // All or nothing: a margin that would carry a counter past 2^31-1 changes nothing.
      expect(restore(database.url, '--margin', '1000000000').code).toBe(0);
      expect(restore(database.url, '--margin', '1000000000').code).toBe(0);
      const tooFar = restore(database.url, '--margin', '1000000000');
      expect(tooFar.code).toBe(1);
      expect(tooFar.stderr).toMatch(/nothing was changed/);
      const last = await startApp({ DATABASE_URL: database.url });
      try {
        expect(ok(await last.gql(ADMIN_TOKEN, QUERY_ENV, { n: 'strict' })).environment).toEqual({
          fence: 2_000_000_006,
          lastIssuedGeneration: 2_000_000_006,
        });
      } finally {
        await last.close();
      }
    } finally {
      await database.cleanup();
    }
  });
});
