/** Start-up: configuration is checked once, the admin token is bootstrapped, health answers. */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { createApp } from '../src/app.js';
import { Clock, DatabaseClock, SystemClock } from '../src/common/clock.js';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { connectionFailure } from '../src/database/data-source.js';
import { distFile } from './fault/service.js';
import { codeOf, scratchDatabase, scratchDir, startApp, TEST_DATABASE } from './support/app.js';

test.each([
  ['PORT', 'http'],
  ['PORT', '70000'],
  ['DATABASE_URL', 'mysql://localhost/db'],
  ['DATABASE_URL', 'sqlite:'],
  ['DATABASE_URL', 'postgres://[bad'],
  ['PLANFENCE_MAX_PLAN_BYTES', '0'],
  ['PLANFENCE_MAX_PLAN_BYTES', '1MB'],
  ['PLANFENCE_MAX_ARTIFACT_BYTES', '0'],
  ['PLANFENCE_MAX_ARTIFACT_BYTES', '4MiB'],
  ['PLANFENCE_IDEMPOTENCY_TTL_HOURS', '-1'],
  ['PLANFENCE_SQLITE_SYNCHRONOUS', 'OFF'],
  ['PLANFENCE_SQLITE_CACHE_MIB', '0'],
  ['PLANFENCE_SQLITE_CHECKPOINT_MS', '-5'],
  ['PLANFENCE_SQLITE_CHECKPOINT_MS', '1s'],
  ['PLANFENCE_ADMIN_TOKEN', 'short'],
  ['PLANFENCE_PLAN_RETENTION_DAYS', 'forever'],
  ['PLANFENCE_RETENTION_INTERVAL_SECONDS', '0'],
  ['PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS', '999'],
  ['PLANFENCE_WEBHOOK_CLAIM_MARGIN_MS', '15s'],
  ['LOG_LEVEL', 'loud'],
  ['PLANFENCE_LOG_FORMAT', 'colour'],
])('a bad %s (%s) stops the start with a message naming it', (variable, value) => {
  let error: unknown;
  try {
    loadConfig({ [variable]: value });
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).variable).toBe(variable);
  expect((error as Error).message).toContain(variable);
});

test.each([
  ['PLANFENCE_PG_POOL_SIZE', '0'],
  ['PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT', '0'],
  ['PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT', 'many'],
])('on PostgreSQL, a bad %s (%s) stops the start with a message naming it', (variable, value) => {
  expect(() =>
    loadConfig({ DATABASE_URL: 'postgres://db.internal/planfence', [variable]: value }),
  ).toThrow(
    expect.objectContaining({
      variable,
      message: expect.stringContaining(variable) as string,
    }) as Error,
  );
});

test('the PostgreSQL defaults are those the README documents', () => {
  expect(loadConfig({ DATABASE_URL: 'postgres://db.internal/planfence' }).database).toEqual({
    kind: 'postgres',
    url: 'postgres://db.internal/planfence',
    poolSize: 10,
    decisionsPerEnvironment: 2,
  });
});

test('the defaults are those the README documents', () => {
  const config = loadConfig({});
  expect(config).toMatchObject({
    port: 4000,
    host: '127.0.0.1',
    maxPlanBytes: 1024 * 1024,
    maxArtifactBytes: 4 * 1024 * 1024,
    idempotencyTtlMs: 24 * 3600_000,
    database: { kind: 'sqlite', synchronous: 'FULL' },
    webhooks: { timeoutMs: 5000, claimMarginMs: 15_000 },
  });
  expect(config.database.kind === 'sqlite' && config.database.path).toMatch(/data\/planfence\.db$/);
});

test('the first start without PLANFENCE_ADMIN_TOKEN writes one, readable by its owner only; a restart keeps it', async () => {
  const dir = scratchDir();
  const database = await scratchDatabase();
  const env = {
    DATABASE_URL: database.url,
    PLANFENCE_ADMIN_TOKEN: '',
    PLANFENCE_ADMIN_TOKEN_FILE: join(dir.path, 'admin-token'),
  };
  try {
    const first = await startApp(env);
    const file = join(dir.path, 'admin-token');
    const token = readFileSync(file, 'utf8').trim();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const whoami = await first.gql(token, '{ whoami { name role } }');
    expect(whoami.data).toEqual({ whoami: { name: 'admin', role: 'ADMIN' } });
    await first.close();

    const second = await startApp(env);
    expect(readFileSync(file, 'utf8').trim()).toBe(token);
    expect((await second.gql(token, '{ whoami { name } }')).data).toEqual({
      whoami: { name: 'admin' },
    });
    await second.close();
  } finally {
    dir.cleanup();
    await database.cleanup();
  }
});

test('PLANFENCE_ADMIN_TOKEN replacing the token of the file makes the start warn, naming the file', async () => {
  const dir = scratchDir();
  const database = await scratchDatabase();
  const file = join(dir.path, 'admin-token');
  const env = { DATABASE_URL: database.url, PLANFENCE_ADMIN_TOKEN_FILE: file };
  const lines: string[] = [];
  const capture = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  try {
    await (await startApp({ ...env, PLANFENCE_ADMIN_TOKEN: '' })).close();
    const fileToken = readFileSync(file, 'utf8').trim();

    const replaced = await startApp(
      { ...env, PLANFENCE_ADMIN_TOKEN: 'an-operator-chosen-token-0123' },
      undefined,
      capture,
    );
    const warnings = lines
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .filter((line) => line.level === 40 && line.msg.includes('PLANFENCE_ADMIN_TOKEN'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0].msg).toContain(file);
    const old = await replaced.gql(fileToken, '{ whoami { name } }');
    expect(codeOf(old)).toBe('UNAUTHENTICATED');
    expect(old.errors?.[0].message).toContain('unknown token');
    expect(
      (await replaced.gql('an-operator-chosen-token-0123', '{ whoami { name } }')).data,
    ).toEqual({ whoami: { name: 'admin' } });
    await replaced.close();

    // The same token again replaces nothing: no warning.
    lines.length = 0;
    await (
      await startApp(
        { ...env, PLANFENCE_ADMIN_TOKEN: 'an-operator-chosen-token-0123' },
        undefined,
        capture,
      )
    ).close();
    expect(lines.filter((line) => line.includes('replaced the admin'))).toEqual([]);
  } finally {
    dir.cleanup();
    await database.cleanup();
  }
});

test('GET /health answers 200 when the database answers', async () => {
  const app = await startApp();
  try {
    const response = await fetch(`${app.url}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', database: TEST_DATABASE });
  } finally {
    await app.close();
  }
});

// proves: R11
test('lease liveness is judged by the database clock on PostgreSQL, by the process clock on SQLite', async () => {
  const database = await scratchDatabase();
  const app = await createApp(
    loadConfig({
      DATABASE_URL: database.url,
      PLANFENCE_ADMIN_TOKEN: 'pf_clock_test_admin_token_0000',
    }),
    {
      logger: pino({ level: 'error' }),
    },
  );
  try {
    const clock = app.get(Clock);
    expect(clock).toBeInstanceOf(TEST_DATABASE === 'postgres' ? DatabaseClock : SystemClock);
    expect(Math.abs((await clock.now()) - Date.now())).toBeLessThan(5000);
  } finally {
    await app.close();
    await database.cleanup();
  }
});

test('headers allowed longer than the whole request stop the start with a configuration error naming both variables (exit 78)', () => {
  const env = {
    PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS: '5',
    PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS: '10',
  };
  expect(() => loadConfig(env)).toThrow(ConfigError);
  expect(() => loadConfig(env)).toThrow(
    /PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS.*PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS/,
  );
  // The request timeout alone below the headers' default (10 s) is the same error.
  expect(() => loadConfig({ PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS: '5' })).toThrow(
    /PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS \(10\).*PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS \(5\)/,
  );

  const started = runBuilt((dir) => ({
    ...env,
    DATABASE_URL: `sqlite:${join(dir, 'planfence.db')}`,
  }));
  expect(started.status).toBe(78);
  expect(started.stderr).toContain('invalid configuration');
  expect(started.stderr).toContain('PLANFENCE_HTTP_HEADERS_TIMEOUT_SECONDS');
  expect(started.stderr).toContain('PLANFENCE_HTTP_REQUEST_TIMEOUT_SECONDS');
  expect(started.stderr).not.toContain('RangeError');
});

/** The environment of a built service started in the scratch folder `dir`, with `env` added. */
function builtEnv(dir: string, env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PLANFENCE_ADMIN_TOKEN_FILE: join(dir, 'admin-token'),
    PORT: '0',
    ...env,
  };
}

/** The built service started with `env` (made for a scratch folder) and run until it exits. */
function runBuilt(env: (dir: string) => Record<string, string>) {
  const dir = scratchDir();
  try {
    return spawnSync(process.execPath, [distFile('src/main.js')], {
      env: builtEnv(dir.path, env(dir.path)),
      encoding: 'utf8',
      timeout: 60_000,
    });
  } finally {
    dir.cleanup();
  }
}

/** A TCP port on this machine that nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** What the built service printed until `until` matched its output (then it is stopped). */
async function outputUntil(env: Record<string, string>, until: RegExp): Promise<string> {
  const dir = scratchDir();
  const child = spawn(process.execPath, [distFile('src/main.js')], {
    env: builtEnv(dir.path, { PLANFENCE_LOG_FORMAT: 'json', ...env }),
  });
  let output = '';
  try {
    return await new Promise<string>((resolve, reject) => {
      const look = (chunk: Buffer) => {
        output += chunk.toString('utf8');
        if (until.test(output)) resolve(output);
      };
      child.stdout.on('data', look);
      child.stderr.on('data', look);
      child.on('exit', (code) => reject(new Error(`exited (${code}) before ${until}: ${output}`)));
    });
  } finally {
    child.kill('SIGKILL');
    dir.cleanup();
  }
}

// No database server is needed: a port nothing listens on refuses every connection.
(TEST_DATABASE === 'sqlite' ? test : test.skip)(
  'a database that does not answer is retried, each attempt one warning naming its cause, without stack traces',
  async () => {
    const url = `postgres://planfence:planfence@127.0.0.1:${await closedPort()}/postgres`;
    const output = await outputUntil({ DATABASE_URL: url }, /attempt 2 of 10[^\n]*\n/);
    const lines = output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; trace?: string });
    const attempts = lines.filter((line) => line.msg.startsWith('could not connect'));
    expect(attempts.map((line) => line.msg)).toEqual([
      expect.stringMatching(
        /^could not connect to the database \(attempt 1 of 10\): connect ECONNREFUSED 127\.0\.0\.1:\d+; trying again in 3 s$/,
      ),
      expect.stringMatching(
        /^could not connect to the database \(attempt 2 of 10\): connect ECONNREFUSED/,
      ),
    ]);
    expect(attempts.every((line) => line.level === 40)).toBe(true);
    // Nothing at error level, and no stack trace anywhere (Nest's own retry line is debug).
    expect(lines.filter((line) => line.level >= 50)).toEqual([]);
    expect(lines.filter((line) => line.trace)).toEqual([]);
    expect(output).not.toMatch(/\n\s+at /);
    expect(output).not.toContain('Unable to connect');
  },
);

(TEST_DATABASE === 'sqlite' ? test : test.skip)(
  'a DATABASE_URL that names a file which is not a SQLite database stops the start at once, saying so',
  () => {
    const started = runBuilt((dir) => {
      writeFileSync(join(dir, 'notes.txt'), 'shopping list: eggs, flour, a SQLite book\n');
      return { DATABASE_URL: `sqlite:${join(dir, 'notes.txt')}` };
    });
    expect(started.status).toBe(1);
    expect(started.stderr).toMatch(
      /failed to start: \S+notes\.txt is not a SQLite database \(it does not begin with SQLite's header\)/,
    );
    // Not retried as a connection that may come back, nor blamed on another process.
    expect(`${started.stdout}${started.stderr}`).not.toMatch(/attempt 1 of|in use by process/);
  },
);

test('a failed connection to a name of several addresses names the failure of each', () => {
  const failed = new AggregateError([
    new Error('connect ECONNREFUSED ::1:5432'),
    new Error('connect ECONNREFUSED 127.0.0.1:5432'),
  ]);
  expect(connectionFailure(failed)).toBe(
    'connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432',
  );
  expect(connectionFailure(new Error('getaddrinfo ENOTFOUND db'))).toBe('getaddrinfo ENOTFOUND db');
});

const postgresServer = process.env.PLANFENCE_TEST_POSTGRES_URL;
(TEST_DATABASE === 'postgres' && postgresServer ? test : test.skip)(
  'a wrong database password stops the start at once, naming it, without connection retries',
  () => {
    const url = new URL(postgresServer!);
    url.password = 'not-the-password';
    const started = runBuilt(() => ({ DATABASE_URL: url.href }));
    expect(started.status).toBe(1);
    expect(started.stderr).toContain('failed to start: password authentication failed');
    // Nest's connection retries log "Unable to connect to the database. Retrying (n)...".
    expect(`${started.stdout}${started.stderr}`).not.toMatch(/Retrying/);
  },
);

test('GET /graphiql says how to turn GraphiQL on while it is off, and serves it once on', async () => {
  const off = await startApp();
  try {
    const response = await fetch(`${off.url}/graphiql`);
    expect(response.status).toBe(404);
    expect(await response.text()).toContain('PLANFENCE_GRAPHIQL=on');
  } finally {
    await off.close();
  }
  const on = await startApp({ PLANFENCE_GRAPHIQL: 'on' });
  try {
    const response = await fetch(`${on.url}/graphiql`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
  } finally {
    await on.close();
  }
});
