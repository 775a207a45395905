/** The real service as a child process on a SQLite file, for the fault harnesses. */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import perfHooks from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

export const ADMIN_TOKEN = 'pf_fault_harness_admin_token_000';
/** The longest a harness waits for one answer: far above any answer on a loaded machine. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Compiled entry points (`npm run build`), found from dist/test/fault or from test/fault. */
const above = fileURLToPath(new URL('../../', import.meta.url));
const DIST = above.endsWith('/dist/') ? above : `${above}dist/`;
export const distFile = (path: string) => `${DIST}${path}`;

/**
 * The Node flags `npm start` gives the service (package.json's `start` script): the service
 * runs here as an operator starts it.
 */
export function startFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(`${DIST}../package.json`, 'utf8')) as {
    scripts: { start: string };
  };
  const flags = /^node\s+(.*?)\s*dist\/src\/main\.js$/.exec(scripts.start);
  if (!flags) throw new Error(`package.json's start script is not "node [flags] dist/src/main.js"`);
  return flags[1].split(/\s+/).filter(Boolean);
}

/**
 * The service's Node flags: those of `npm start`, or PLANFENCE_SERVICE_NODE_FLAGS
 * (space-separated; in the environment or a service's `env`) in their place: the benchmarks'
 * `--baseline-flags` measures other flags side by side with the start's.
 */
function nodeFlags(env: Record<string, string | undefined>): string[] {
  const flags = env.PLANFENCE_SERVICE_NODE_FLAGS ?? process.env.PLANFENCE_SERVICE_NODE_FLAGS;
  return flags === undefined ? startFlags() : flags.split(' ').filter(Boolean);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Whether the process has exited, with a code or killed by a signal (its exitCode is then null). */
export function ended(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

export class ServiceProcess {
  private child: ChildProcess | null = null;
  private port = 0;
  url = '';

  /**
   * `database`: a SQLite file path, or a postgres:// URL that several instances may share.
   * `env`: variables added to (or overriding) the service's environment.
   */
  constructor(
    private readonly database: string,
    private readonly env: Record<string, string> = {},
  ) {}

  /** The service's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    this.port ||= await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    // PLANFENCE_SERVICE_ENTRY (in `env` or the environment): another build of the service
    // (the benchmarks' side-by-side baseline, or `npm run bench:statements` of an older one).
    const entry =
      this.env.PLANFENCE_SERVICE_ENTRY ??
      process.env.PLANFENCE_SERVICE_ENTRY ??
      distFile('src/main.js');
    this.child = spawn(process.execPath, [...nodeFlags(this.env), entry], {
      env: {
        ...process.env,
        PORT: String(this.port),
        DATABASE_URL: this.database.startsWith('postgres')
          ? this.database
          : `sqlite:${this.database}`,
        PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
        PLANFENCE_SQLITE_SYNCHRONOUS: 'FULL',
        ...this.env,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    // Generous: a start is slow on a loaded machine, and this is no measurement.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      try {
        if ((await fetch(`${this.url}/health`)).ok) return;
      } catch {
        // not listening yet
      }
      if (ended(this.child))
        throw new Error(`service exited with ${this.child.exitCode ?? this.child.signalCode}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await this.crash();
    throw new Error('service did not become healthy within 60 s');
  }

  /** kill -9: no shutdown hook, no flush, exactly what a crash does. */
  async crash(): Promise<void> {
    const child = this.child;
    if (!child || ended(child)) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM; a service that has not exited 15 s later is killed, and that is an error. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || ended(child)) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), 15_000);
    });
    const outcome = await Promise.race([exited, late]);
    clearTimeout(timer);
    if (outcome === 'late') {
      await this.crash();
      throw new Error(`service ${child.pid} did not stop within 15 s of SIGTERM`);
    }
  }

  async gql<T = any>(token: string, query: string, variables: Record<string, unknown> = {}) {
    const response = await fetch(`${this.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
      // No request of a harness may hang it: one with no answer in this time fails, as a
      // connection cut by a kill does.
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return (await response.json()) as {
      data: T | null;
      errors?: { message: string; extensions: Record<string, any> }[];
    };
  }

  /** Issues a token as the admin and returns it. */
  async issueToken(
    name: string,
    role: 'ADMIN' | 'AGENT' | 'REVIEWER' | 'DEPLOYER' | 'VIEWER' | 'CHECKER',
  ): Promise<string> {
    const data = await this.ok<{ issueToken: { token: string } }>(
      ADMIN_TOKEN,
      'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
      { name, role },
    );
    return data.issueToken.token;
  }

  async ok<T = any>(
    token: string,
    query: string,
    variables: Record<string, unknown> = {},
  ): Promise<T> {
    const result = await this.gql<T>(token, query, variables);
    if (result.errors) throw new Error(`${query}: ${JSON.stringify(result.errors)}`);
    return result.data!;
  }
}

/** mulberry32: small, seeded, reproducible. */
export function seededRandom(seed: number): (n: number) => number {
  let state = seed | 0;
  return (n: number) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** `--name value` from argv, or the fallback. */
export function option(argv: string[], name: string, fallback: number): number {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? Number(argv[at + 1]) : fallback;
}

/** Creates a database of its own on a PostgreSQL server; `drop` removes it whatever holds it open. */
export async function createPostgresDatabase(
  server: string,
  prefix: string,
  /** A database to copy (CREATE DATABASE … TEMPLATE), e.g. one already migrated. */
  template?: string,
  /** Settings for every session on the new database (ALTER DATABASE … SET). */
  settings: Record<string, string> = {},
): Promise<{ url: string; drop: () => Promise<void> }> {
  const { default: pg } = await import('pg');
  await sweptOnce(server);
  const name = `${prefix}_${process.pid}_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  for (const [setting, value] of Object.entries(settings))
    await admin(`ALTER DATABASE ${name} SET ${setting} = ${value}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => dropPostgresDatabase(server, name) };
}

/**
 * This process's sweep of abandoned databases, once, before its first database: kept on a
 * built-in module, which every jest test file's module registry in a worker shares.
 */
function sweptOnce(server: string): Promise<void> {
  const holder = perfHooks as unknown as Record<symbol, Promise<void> | undefined>;
  const key = Symbol.for('planfence.abandoned-databases-swept');
  let swept = holder[key];
  if (!swept) {
    swept = dropAbandonedDatabases(server).catch(() => undefined);
    Object.defineProperty(holder, key, { value: swept });
  }
  return swept;
}

/** How old a database of a process that is gone must be before a sweep drops it. */
const ABANDONED_AFTER_MS = 3600_000;

/**
 * Drops the databases that a killed test, harness or benchmark left on the server: those
 * named by createPostgresDatabase, made over an hour ago by a process of this machine that
 * no longer runs (a process that ends drops its own).
 */
async function dropAbandonedDatabases(server: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  let names: string[];
  try {
    const rows = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname ~ '^planfence_[a-z0-9_]+_[0-9]+_[0-9]{13}_[a-z0-9]+$'",
    );
    names = rows.rows.map((row) => row.datname);
  } finally {
    await client.end();
  }
  for (const name of names) {
    const [, pid, made] = /_(\d+)_(\d{13})_[a-z0-9]+$/.exec(name)!;
    if (Date.now() - Number(made) < ABANDONED_AFTER_MS || running(Number(pid))) continue;
    await dropPostgresDatabase(server, name).catch(() => undefined);
  }
}

/** Whether a process with this id runs on this machine. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM';
  }
}

export /**
 * DROP DATABASE … WITH (FORCE), again a little later while an autovacuum worker (a session
 * of another role, which FORCE may not end) is connected to it.
 */
async function dropPostgresDatabase(server: string, name: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== '42501' || attempt >= 50) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    await client.end();
  }
}

/** A fresh database for one harness run: a SQLite file, or a new database on a PostgreSQL server. */
export function harnessDatabase(
  postgresServer: string | null,
  dir: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!postgresServer)
    return Promise.resolve({ url: `${dir}/planfence.db`, drop: () => Promise.resolve() });
  return createPostgresDatabase(postgresServer, 'planfence_harness');
}

export interface Deployment {
  instances: ServiceProcess[];
  /** Stops every instance and removes the database. */
  stop(): Promise<void>;
}

/**
 * Service instances on one fresh database (a SQLite file, or a new PostgreSQL database
 * that several instances share), started together: migrations run once, under the lock.
 */
export async function deploy(
  options: { postgres?: string | null; instances?: number },
  name: string,
): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), `planfence-${name}-`));
  const database = await harnessDatabase(options.postgres ?? null, dir);
  const instances = Array.from(
    { length: options.instances ?? 1 },
    () => new ServiceProcess(database.url),
  );
  const started = await Promise.allSettled(instances.map((instance) => instance.start()));
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    // Nothing of a failed deployment outlives it.
    await Promise.allSettled(instances.map((instance) => instance.crash()));
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
    throw failed.reason;
  }
  return {
    instances,
    async stop() {
      // Every instance is stopped and the database dropped even when one stop fails.
      const stopped = await Promise.allSettled(instances.map((instance) => instance.stop()));
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
      const failed = stopped.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}

/** `--name value` from argv as text, or null. */
export function textOption(argv: string[], name: string): string | null {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : null;
}
