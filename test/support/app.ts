import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger } from 'pino';
import type { ManualClock } from '../../src/common/clock.js';
import { createPostgresDatabase } from '../fault/service.js';
import { migratedTemplate } from './postgres-template.js';
import { serviceModules } from './service.js';

export const ADMIN_TOKEN = 'pf_admin_token_for_tests_0123456789';

export interface GqlResult<T = Record<string, any>> {
  status: number;
  data: T | null;
  errors?: { message: string; extensions?: Record<string, any> }[];
}

export interface TestApp {
  url: string;
  clock: ManualClock;
  app: NestFastifyApplication;
  /**
   * The running service's provider of class `type`, as the test imported it from src/ (or
   * from a package). A service started from dist/ (test/support/native.js) has classes of
   * its own: there the provider is the one whose class has the same name.
   */
  get<T>(type: abstract new (...args: never[]) => T): T;
  /**
   * How many turns of the event loop the service's queued work has taken so far
   * (src/common/loop-turns.ts, as this service loaded it).
   */
  turnsTaken(): number;
  /** Sends one GraphQL operation over HTTP as the holder of `token` (or none). */
  gql<T = Record<string, any>>(
    token: string | null,
    query: string,
    variables?: Record<string, unknown>,
  ): Promise<GqlResult<T>>;
  close(): Promise<void>;
}

/** The database this jest project runs against (jest.config.js sets it per project). */
export const TEST_DATABASE: 'sqlite' | 'postgres' =
  (globalThis as { __DATABASE__?: 'postgres' }).__DATABASE__ ?? 'sqlite';

/**
 * A fresh database for one test, in this project's dialect: a SQLite file, or a new
 * PostgreSQL database on PLANFENCE_TEST_POSTGRES_URL's server. It survives app restarts
 * until `cleanup` (a PostgreSQL one, in a jest run, until the run ends).
 */
export async function scratchDatabase(
  /** PostgreSQL: a copy of the run's migrated template (test/support/global-setup.ts), not an empty database. */
  migrated = false,
  /** The dialect, where a file tests another than its project's. */
  dialect: 'sqlite' | 'postgres' = TEST_DATABASE,
): Promise<{ url: string; cleanup: () => Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = scratchDir();
    return {
      url: `sqlite:${dir.path}/planfence.db`,
      cleanup: () => Promise.resolve(dir.cleanup()),
    };
  }
  const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
  if (!server) throw new Error('PLANFENCE_TEST_POSTGRES_URL is not set');
  const template = migrated ? await migratedTemplate(server) : null;
  // A commit returns before PostgreSQL flushes its WAL: what a commit makes visible is the
  // same, only a crash of PostgreSQL itself (which no test causes) could lose it. The
  // fault harnesses, which crash the service, keep the default.
  const run = process.env.PLANFENCE_TEST_POSTGRES_DATABASES;
  const database = await createPostgresDatabase(
    server,
    run ?? 'planfence_test',
    template ?? undefined,
    { synchronous_commit: 'off' },
  );
  // In a jest run the databases are dropped together when the run ends
  // (test/support/global-teardown.js): a DROP DATABASE makes the server checkpoint at once,
  // writing out what the tests still running beside it had changed.
  return { url: database.url, cleanup: run ? () => Promise.resolve() : database.drop };
}

/** A scratch folder that is removed when `cleanup` runs. */
export function scratchDir(): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), 'planfence-test-'));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/**
 * Starts the real service on a loopback port, on a fresh database of this project's
 * dialect (`sqlite::memory:` or a new PostgreSQL database) unless DATABASE_URL is given.
 */
export async function startApp(
  env: Record<string, string> = {},
  /** null: the service's own clock (the database's on PostgreSQL); by default a ManualClock. */
  given?: ManualClock | null,
  logger?: Logger,
): Promise<TestApp> {
  const startedAt = performance.now();
  const { createApp, ManualClock, loadConfig, loopTurns, pino } = await serviceModules();
  const clock = given === undefined ? new ManualClock() : given;
  const scratch = scratchDir();
  const database =
    env.DATABASE_URL || TEST_DATABASE === 'sqlite'
      ? { url: env.DATABASE_URL ?? 'sqlite::memory:', cleanup: () => Promise.resolve() }
      : await scratchDatabase(true);
  const config = loadConfig({
    DATABASE_URL: database.url,
    PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
    PLANFENCE_ADMIN_TOKEN_FILE: join(scratch.path, 'admin-token'),
    // fetch keeps an idle connection for the service's keep-alive less a second. At the
    // default 5 s, a test process that is slow to run its timers can send on a connection
    // the service has just closed (ECONNRESET). Here the service keeps idle connections
    // longer than any test leaves one idle.
    PLANFENCE_HTTP_KEEP_ALIVE_SECONDS: '120',
    ...env,
  });
  const app = await createApp(config, {
    clock: clock ?? undefined,
    logger: logger ?? pino({ level: 'error' }),
  });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  appStats.starts += 1;
  appStats.startMs += performance.now() - startedAt;
  const testApp: TestApp = {
    url,
    clock: clock ?? new ManualClock(),
    app,
    get: (type) => providerOf(app, type),
    turnsTaken: () => loopTurns.taken,
    async gql(token, query, variables = {}) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, variables }),
      });
      const body = (await response.json()) as GqlResult;
      return { ...body, status: response.status } as any;
    },
    close: () => closeOnce(),
  };
  let closing: Promise<void> | null = null;
  const closeOnce = () => {
    closing ??= (async () => {
      open.delete(closeOnce);
      // Every part is released even when an earlier one fails; the first failure is reported.
      const results = await Promise.allSettled([app.close()]);
      // Outside a jest run, a PostgreSQL database is dropped while the file's next tests run
      // (a drop waits for a checkpoint); the file's end waits for every drop (`closeOpenApps`).
      const dropped = database.cleanup();
      drops.add(dropped);
      void dropped.finally(() => drops.delete(dropped)).catch(() => undefined);
      results.push(...(await Promise.allSettled([Promise.resolve().then(scratch.cleanup)])));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    })();
    return closing;
  };
  open.add(closeOnce);
  return testApp;
}

/**
 * How many apps this test file started and the milliseconds their starts took (fresh
 * database, Nest graph, listen): test/support/environment.js records them with the file's
 * CPU (PLANFENCE_TEST_CPU).
 */
const appStats = { starts: 0, startMs: 0 };
(globalThis as { __planfenceAppStats?: typeof appStats }).__planfenceAppStats = appStats;

/** Apps started by this test file and not closed yet: `closeOpenApps` closes them after the file. */
const open = new Set<() => Promise<void>>();

// test/support/environment.js calls it once the file's own hooks have run.
(globalThis as { __planfenceCloseOpenApps?: () => Promise<void> }).__planfenceCloseOpenApps =
  closeOpenApps;

/** Databases of closed apps still being dropped. */
const drops = new Set<Promise<void>>();

/**
 * Closes every app this test file left open, whatever path its tests took, and waits for
 * their databases to be dropped (test/support/environment.js).
 */
export async function closeOpenApps(): Promise<void> {
  const results = await Promise.allSettled([...open].map((close) => close()));
  results.push(...(await Promise.allSettled([...drops])));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** The error code of a GraphQL answer, or 'OK' when it has none. */
export function codeOf(result: GqlResult): string {
  const error = result.errors?.[0];
  // Every rejection explains itself: a code without a message is a defect.
  if (error && !error.message.trim())
    throw new Error(`error ${JSON.stringify(error)} has no message`);
  return error?.extensions?.code ?? 'OK';
}

/** The data of an answer that must have succeeded. */
export function ok<T>(result: GqlResult<T>): T {
  if (result.errors?.length) {
    throw new Error(`expected success, got ${JSON.stringify(result.errors)}`);
  }
  return result.data as T;
}

/** See TestApp.get: the provider whose class is `type`, else the one whose class has its name. */
function providerOf<T>(app: NestFastifyApplication, type: abstract new (...args: never[]) => T): T {
  const { container } = app as unknown as {
    container: { getModules(): Map<string, { providers: Map<unknown, { instance: unknown }> }> };
  };
  let named: unknown;
  for (const module of container.getModules().values())
    for (const [token, wrapper] of module.providers) {
      if (!wrapper.instance) continue;
      if (token === type) return wrapper.instance as T;
      if (typeof token === 'function' && token.name === type.name) named ??= wrapper.instance;
    }
  if (named === undefined) throw new Error(`the service has no provider of class ${type.name}`);
  return named as T;
}
