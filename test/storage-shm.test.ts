/**
 * SQLite maps its shared-memory file (`planfence.db-shm`) into the process. Once that file
 * cannot be written (`chattr +i`, a read-only mode or mount), the next access to the mapping
 * ends the process with SIGBUS (exit 135) and not a word in the log, and no JavaScript
 * handler can catch it. So the service checks the file itself, before it opens the database
 * and every 100 ms while it runs (and before every read and write): it stops with exit code 74 and a
 * message naming the file, refuses to start while the file stays so, and starts cleanly,
 * data intact, once it is writable again.
 *
 * The built service runs as a child process (dist/src/main.js): the test reads its exit
 * code and output.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { distFile, freePort } from './fault/service.js';
import { ADMIN_TOKEN, ok, scratchDir, TEST_DATABASE, type GqlResult } from './support/app.js';

const EXIT_STORAGE_UNSAFE = 74;

/** Makes `file` unwritable: the immutable attribute as root (what an attacker with root does), a 0400 mode otherwise. */
function makeUnwritable(file: string): (() => void) | null {
  if (process.getuid?.() !== 0) {
    spawnSync('chmod', ['0400', file]);
    return () => spawnSync('chmod', ['0600', file]);
  }
  if (spawnSync('chattr', ['+i', file]).status !== 0) return null;
  return () => spawnSync('chattr', ['-i', file]);
}

class Service {
  readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    file: string,
    readonly url: string,
    port: number,
  ) {
    this.child = spawn(process.execPath, [distFile('src/main.js')], {
      env: {
        ...process.env,
        PORT: String(port),
        DATABASE_URL: `sqlite:${file}`,
        PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
        // Nothing of the service's own reads the database while the file turns unwritable.
        PLANFENCE_WEBHOOK_POLL_MS: '3600000',
        LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
  }

  static async start(file: string): Promise<Service> {
    const port = await freePort();
    const service = new Service(file, `http://127.0.0.1:${port}`, port);
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

  async gql<T>(query: string): Promise<GqlResult<T>> {
    const response = await fetch(`${this.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ query }),
    });
    return (await response.json()) as GqlResult<T>;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }
}

const usable = (() => {
  if (TEST_DATABASE !== 'sqlite') return false;
  const dir = scratchDir();
  try {
    const probe = join(dir.path, 'probe');
    writeFileSync(probe, '');
    const undo = makeUnwritable(probe);
    undo?.();
    return undo !== null;
  } finally {
    dir.cleanup();
  }
})();

(usable ? describe : describe.skip)('an unwritable -shm file', () => {
  test(`stops the service with exit ${EXIT_STORAGE_UNSAFE} and the reason (not SIGBUS), refuses a start while it lasts, and starts cleanly after`, async () => {
    const dir = scratchDir();
    const file = join(dir.path, 'planfence.db');
    let undo: (() => void) | null = null;
    try {
      const service = await Service.start(file);
      try {
        expect((await fetch(`${service.url}/health`)).status).toBe(200);
        ok(
          await service.gql(
            `mutation { createEnvironment(input: { name: "prod", mode: MONOTONIC }) { name } }`,
          ),
        );
        expect(existsSync(`${file}-shm`)).toBe(true);

        undo = makeUnwritable(`${file}-shm`);
        const ended = await Promise.race([
          service.exited,
          new Promise<null>((resolve) => setTimeout(() => resolve(null), 20_000)),
        ]);
        expect(ended).toEqual({ code: EXIT_STORAGE_UNSAFE, signal: null });
        expect(service.output).toContain(`planfence: stopping (exit ${EXIT_STORAGE_UNSAFE})`);
        expect(service.output).toContain(`${file}-shm cannot be written`);
        expect(service.output).toMatch(/SIGBUS/);
      } finally {
        await service.stop();
      }

      // A start while the file stays unwritable is refused at once, saying why.
      const refused = await Service.start(file);
      expect(await refused.exited).toEqual({ code: EXIT_STORAGE_UNSAFE, signal: null });
      expect(refused.output).toContain(`${file}-shm cannot be written`);

      undo?.();
      undo = null;
      const again = await Service.start(file);
      try {
        expect((await fetch(`${again.url}/health`)).status).toBe(200);
        const read = ok(
          await again.gql<{ environment: { name: string } }>(
            `{ environment(name: "prod") { name } }`,
          ),
        );
        expect(read.environment).toEqual({ name: 'prod' });
      } finally {
        await again.stop();
      }
    } finally {
      undo?.();
      dir.cleanup();
    }
  }, 120_000);
});
