/**
 * /health speaks for the writes clients make: on a disk with room for a lease renewal and
 * none for a plan, it stays 503 (with the reason) however many small writes commit, until
 * the file system has what the largest allowed write needs (PLANFENCE_STORAGE_MIN_FREE_BYTES)
 * and a client's write commits. The free-space reading is the file system's own (statfs):
 * a threshold above any disk stands for a full one, and where this process may mount a
 * small tmpfs (root on Linux) the disk is filled for real.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { largestWriteBytes, loadConfig } from '../src/config/config.js';
import { codeOf, scratchDir, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { World } from './support/world.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? describe : describe.skip;

async function health(app: TestApp): Promise<{ status: number; reason?: string }> {
  const response = await fetch(`${app.url}/health`);
  const body = (await response.json()) as { reason?: string };
  return { status: response.status, reason: body.reason };
}

test('the default threshold is what the largest submit needs, written twice; 0 turns it off', () => {
  const config = loadConfig({});
  expect(config.minFreeBytes).toBe(largestWriteBytes(config.maxPlanBytes, config.maxArtifactBytes));
  // 1 MiB content + 1 MiB summary + a 4 MiB plan file in base64, twice, and 1 MiB.
  expect(config.minFreeBytes).toBe(2 * (2 * 1048576 + Math.ceil((4 * 1048576) / 3) * 4) + 1048576);
  expect(loadConfig({ PLANFENCE_STORAGE_MIN_FREE_BYTES: '0' }).minFreeBytes).toBe(0);
  expect(() => loadConfig({ PLANFENCE_STORAGE_MIN_FREE_BYTES: 'lots' })).toThrow(
    'PLANFENCE_STORAGE_MIN_FREE_BYTES',
  );
});

onSqlite('a threshold above the free space', () => {
  test('/health is 503 naming the free space and the threshold; at the default it is 200', async () => {
    const dir = scratchDir();
    const file = `sqlite:${join(dir.path, 'planfence.db')}`;
    try {
      const short = await startApp({
        DATABASE_URL: file,
        PLANFENCE_STORAGE_MIN_FREE_BYTES: String(2 ** 52),
      });
      try {
        const refused = await health(short);
        expect(refused.status).toBe(503);
        expect(refused.reason).toMatch(
          /the disk is nearly full: [\d.]+ MiB free where the largest allowed write needs [\d.]+ MiB \(PLANFENCE_STORAGE_MIN_FREE_BYTES\)/,
        );
        // Writes are still tried: a small one commits, and /health still says 503.
        await new World(short).createEnvironment('prod', 'MONOTONIC');
        expect((await health(short)).status).toBe(503);
      } finally {
        await short.close();
      }
      const fine = await startApp({ DATABASE_URL: file });
      try {
        expect((await health(fine)).status).toBe(200);
      } finally {
        await fine.close();
      }
    } finally {
      dir.cleanup();
    }
  });
});

/** A small tmpfs of its own, when this process may mount one (root on Linux); else null. */
function smallFileSystem(megabytes: number): { path: string; cleanup: () => void } | null {
  const path = mkdtempSync(join(tmpdir(), 'planfence-free-space-'));
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

const probe = TEST_DATABASE === 'sqlite' ? smallFileSystem(1) : null;
probe?.cleanup();
if (TEST_DATABASE === 'sqlite' && !probe) {
  console.warn(
    'storage-free-space.test.ts: the full-disk case is SKIPPED: this process cannot mount a small tmpfs (needs root on Linux)',
  );
}

(probe ? describe : describe.skip)('a full disk that still takes small writes', () => {
  test('a lease renewal that commits does not bring /health back while every plan fails; freeing space does', async () => {
    const fs = smallFileSystem(24)!;
    let app: TestApp | null = null;
    try {
      app = await startApp({
        DATABASE_URL: `sqlite:${join(fs.path, 'planfence.db')}`,
        PLANFENCE_STORAGE_MIN_FREE_BYTES: String(2 * 1048576),
        PLANFENCE_HEALTH_WRITE_FAILURE_SECONDS: '3600',
        // The test leaves room for a renewal and none for a plan: a checkpoint copying
        // pages into the database file meanwhile, as the checkpoint thread may at any
        // moment, would take that room. The connection checkpoints only at 1,000 pages.
        PLANFENCE_SQLITE_CHECKPOINT_MS: '0',
      });
      const world = new World(app);
      await world.createEnvironment('prod', 'MONOTONIC', false);
      const agent = await world.issue('agent', 'AGENT');
      const generation = await world.acquire(agent, 'prod', 600);
      expect((await health(app)).status).toBe(200);

      // Fill what is left of the file system.
      const filler = join(fs.path, 'filler');
      mkdirSync(filler);
      try {
        for (let i = 0; ; i++) writeFileSync(join(filler, String(i)), Buffer.alloc(64 * 1024, 1));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
      }
      // Room for a small write, none for a plan.
      for (const i of [0, 1, 2, 3]) rmSync(join(filler, String(i)));

      const plan = 'x'.repeat(400 * 1024);
      const codes: string[] = [];
      for (let i = 0; i < 20 && !codes.includes('STORAGE_UNAVAILABLE'); i++)
        codes.push(codeOf(await world.submit(agent, 'prod', generation, `${plan}${i}`)));
      expect(codes).toContain('STORAGE_UNAVAILABLE');
      expect((await health(app)).status).toBe(503);

      // The small write commits...
      expect(codeOf(await world.renew(agent, 'prod', generation, 600))).toBe('OK');
      // ...and /health still says 503, with the reason, while a plan still cannot be stored.
      const after = await health(app);
      expect(after.status).toBe(503);
      expect(after.reason).toMatch(/disk is (full|nearly full)/);
      expect(codeOf(await world.submit(agent, 'prod', generation, `${plan}-again`))).toBe(
        'STORAGE_UNAVAILABLE',
      );
      expect((await health(app)).status).toBe(503);

      rmSync(filler, { recursive: true, force: true });
      const room = await world.submit(agent, 'prod', generation, `${plan}-room`);
      expect(room.errors ?? []).toEqual([]);
      expect((await health(app)).status).toBe(200);
    } finally {
      await app?.close();
      fs.cleanup();
    }
  });
});
