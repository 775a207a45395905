/**
 * What a start says (the built service, `node dist/src/main.js`): a few lines, not the
 * framework's module-loading chatter; ISO times; one listening line that names the
 * dashboard; one line on the OIDC configuration; PLANFENCE_LOG_FORMAT chooses JSON or lines
 * for people and is validated like every other variable. And what becomes of the lines,
 * written in batches, when stdout's reader stops reading or goes away, and at a second
 * signal.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { distFile, ended } from './fault/service.js';
import { scratchDir } from './support/app.js';
import { until } from './support/until.js';

interface Started {
  child: ChildProcess;
  lines: string[];
  /** The dashboard URL of the listening line. */
  dashboard: string;
  /** What the process has written to stderr so far. */
  stderr: () => string;
  /** Every whole line the process has written to stdout so far. */
  output: () => string[];
}

// Each test starts the built service; on a busy machine a start takes a while.
const START_BOUND_MS = 180_000;

const children = new Set<ChildProcess>();
afterEach(async () => {
  for (const child of children) {
    if (!ended(child)) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
  children.clear();
});

/** Starts the service on a fresh SQLite file and waits until it has said what it says at start. */
async function start(env: Record<string, string>, dir: string): Promise<Started> {
  const inherited = { ...process.env };
  for (const name of ['PLANFENCE_ADMIN_TOKEN', 'LOG_LEVEL', 'PLANFENCE_LOG_FORMAT'])
    delete inherited[name];
  const child = spawn(process.execPath, [distFile('src/main.js')], {
    env: {
      ...inherited,
      DATABASE_URL: `sqlite:${join(dir, 'planfence.db')}`,
      PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const lines: string[] = [];
  let buffered = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise<Started>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      lines.push(...parts);
      // The OIDC line is the last line of a start.
      if (parts.some((line) => line.includes('OIDC'))) {
        const listening = lines.find((line) => line.includes('listening on')) ?? '';
        const dashboard = /dashboard (http:\/\/\S+\/)/.exec(listening)?.[1] ?? '';
        resolve({ child, lines: [...lines], dashboard, stderr: () => stderr, output: () => lines });
      }
    });
    child.once('exit', (code) =>
      reject(new Error(`the service exited (${code}) before it started: ${stderr}`)),
    );
  });
}

test(
  'a default start says a few JSON lines with ISO times: one listening line naming the dashboard, one on OIDC, and nothing on stderr',
  async () => {
    const dir = scratchDir();
    try {
      const { lines, dashboard, stderr } = await start({}, dir.path);
      const entries = lines.map((line) => JSON.parse(line) as { time: unknown; msg: string });
      for (const entry of entries)
        expect(entry.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(lines.length).toBeLessThanOrEqual(6);
      expect(lines.join('\n')).not.toMatch(/InstanceLoader|RoutesResolver|RouterExplorer/);
      expect(entries.filter((e) => e.msg.startsWith('listening on'))).toHaveLength(1);
      expect(entries.filter((e) => e.msg.includes('OIDC'))).toEqual([
        expect.objectContaining({ msg: expect.stringContaining('no OIDC configuration') }),
      ]);
      expect(dashboard).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const page = await fetch(dashboard);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect((await fetch(`${dashboard}health`)).status).toBe(200);
      // No runtime warning (a deprecation, a framework's complaint) reaches an operator.
      expect(stderr()).toBe('');
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'PLANFENCE_LOG_FORMAT=pretty: one readable line each, with the time first',
  async () => {
    const dir = scratchDir();
    try {
      const { lines } = await start({ PLANFENCE_LOG_FORMAT: 'pretty' }, dir.path);
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines)
        expect(line).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z (INFO|WARN) /);
      expect(lines.filter((line) => line.includes('listening on'))).toHaveLength(1);
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'a loaded OIDC configuration is said, with its issuers',
  async () => {
    const dir = scratchDir();
    try {
      const path = join(dir.path, 'oidc.json');
      writeFileSync(
        path,
        JSON.stringify({
          issuers: [
            {
              issuer: 'https://token.actions.githubusercontent.com',
              audience: 'planfence',
              algorithms: ['RS256'],
              rules: [
                {
                  claims: { repository_owner_id: '1' },
                  principal: 'gha:{repository}',
                  role: 'AGENT',
                },
              ],
            },
          ],
        }),
      );
      const { lines } = await start({ PLANFENCE_OIDC_CONFIG: path }, dir.path);
      const oidc = lines.filter((line) => line.includes('OIDC'));
      expect(oidc).toHaveLength(1);
      expect(oidc[0]).toContain(`OIDC configuration loaded from ${path}`);
      expect(oidc[0]).toContain('https://token.actions.githubusercontent.com');
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'LOG_LEVEL=debug shows the framework start-up lines again',
  async () => {
    const dir = scratchDir();
    try {
      const { lines } = await start({ LOG_LEVEL: 'debug' }, dir.path);
      expect(lines.join('\n')).toMatch(/InstanceLoader/);
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'a bad PLANFENCE_LOG_FORMAT stops the start with a configuration error (exit 78)',
  () => {
    const dir = scratchDir();
    try {
      const run = spawnSync(process.execPath, [distFile('src/main.js')], {
        env: {
          ...process.env,
          DATABASE_URL: `sqlite:${join(dir.path, 'planfence.db')}`,
          PORT: '0',
          PLANFENCE_LOG_FORMAT: 'colour',
        },
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(run.status).toBe(78);
      expect(run.stderr).toContain('invalid configuration: PLANFENCE_LOG_FORMAT');
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'what a start leaves unloaded until used is still there: each stand-in loads its real file',
  () => {
    // The service's entry defers files its libraries load but it never calls into (the
    // drivers of databases it does not run on). Each must name a file and an export a
    // library upgrade has kept, or a service on PostgreSQL would fail at its first connection.
    const script = `
      const { DEFERRED_MODULES } = await import(${JSON.stringify(distFile('src/common/defer-modules.js'))});
      const { createRequire } = await import('node:module');
      const require = createRequire(import.meta.url);
      const found = DEFERRED_MODULES.map(({ file, names }) => {
        const standIn = require(file);
        return names.map((name) => typeof standIn[name]).join(',');
      });
      console.log(JSON.stringify({ count: DEFERRED_MODULES.length, found }));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stderr).toBe('');
    const { count, found } = JSON.parse(run.stdout) as { count: number; found: string[] };
    expect(count).toBeGreaterThanOrEqual(17);
    expect(found).toEqual(Array(count).fill('function'));
  },
  START_BOUND_MS,
);

/** Resolves with the child's exit code, or its signal's name. */
function exited(child: ChildProcess): Promise<number | string> {
  if (ended(child)) return Promise.resolve(child.exitCode ?? child.signalCode!);
  return new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
}

const requestLines = (lines: string[], path: string) =>
  lines.filter((line) => line.includes('"msg":"request"') && line.includes(`"path":"${path}"`));

test(
  'a reader of stdout that stops reading holds up no request, and it is given every line once it reads again',
  async () => {
    const dir = scratchDir();
    try {
      const { child, dashboard, output } = await start({}, dir.path);
      child.stdout!.pause();
      // A line for each answer: several times what a pipe holds (64 KiB) while nobody reads.
      const statuses: number[] = [];
      for (let round = 0; round < 60; round++)
        statuses.push(
          ...(await Promise.all(
            Array.from({ length: 25 }, () =>
              fetch(`${dashboard}health`).then((response) => response.status),
            ),
          )),
        );
      expect(statuses.filter((status) => status === 200)).toHaveLength(1_500);
      child.stdout!.resume();
      await until('every request line', () => requestLines(output(), '/health').length >= 1_500, {
        progress: () => output().length,
      });
      for (const line of output()) expect(() => JSON.parse(line) as unknown).not.toThrow();
      child.kill('SIGTERM');
      expect(await exited(child)).toBe(0);
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  "a service whose stdout's reader is gone still stops on SIGTERM",
  async () => {
    const dir = scratchDir();
    try {
      const { child, dashboard } = await start({}, dir.path);
      expect((await fetch(`${dashboard}health`)).status).toBe(200);
      // The log shipper ends: the pipe has no reader any more.
      child.stdout!.destroy();
      child.kill('SIGTERM');
      expect(await exited(child)).not.toBe('SIGKILL');
      expect(child.exitCode).not.toBeNull();
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);

test(
  'a second SIGTERM during the shutdown exits at once (1), after writing every line',
  async () => {
    const dir = scratchDir();
    try {
      const { child, dashboard, output } = await start(
        { PLANFENCE_SHUTDOWN_TIMEOUT_SECONDS: '600' },
        dir.path,
      );
      // A request whose body never ends: the shutdown waits for it.
      const url = new URL(dashboard);
      const slow = connect(Number(url.port), url.hostname);
      await new Promise((resolve) => slow.once('connect', resolve));
      slow.on('error', () => {});
      slow.write(
        'POST /graphql HTTP/1.1\r\nHost: planfence\r\nContent-Type: application/json\r\n' +
          'Content-Length: 100\r\n\r\n{',
      );
      expect((await fetch(`${dashboard}health`)).status).toBe(200);
      child.kill('SIGTERM');
      await until('the shutdown line', () =>
        output().some((line) => line.includes('SIGTERM: shutting down')),
      );
      child.kill('SIGTERM');
      expect(await exited(child)).toBe(1);
      slow.destroy();
      const said = output().map((line) => (JSON.parse(line) as { msg: string }).msg);
      expect(said).toContain('SIGTERM again: exiting without waiting for the shutdown');
      expect(requestLines(output(), '/health')).toHaveLength(1);
    } finally {
      dir.cleanup();
    }
  },
  START_BOUND_MS,
);
