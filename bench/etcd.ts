/**
 * Scenario 7, the peer: the same decision on etcd, one member on loopback with its own
 * data directory (fsync per commit, etcd's default). A Txn compares the stored fence with
 * the request's generation and, when the generation is not below it, raises the fence,
 * stores the plan and moves the pointer; otherwise it reads the fence to name the
 * rejection. Driven from this process with the same concurrency as the HTTP scenarios.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { freePort } from '../test/fault/service.js';
import { closedLoop, peakRssMb, type Run } from './measure.js';

/** etcd's version line, or null when no `etcd` binary is on PATH. */
export function etcdVersion(): string | null {
  try {
    return /etcd Version: (\S+)/.exec(
      execFileSync('etcd', ['--version'], { encoding: 'utf8' }),
    )![1];
  } catch {
    return null;
  }
}

/** Zero-padded so that etcd's byte-wise comparison orders generations as numbers. */
const pad = (generation: number) => String(generation).padStart(12, '0');

export async function runEtcd(options: {
  staleShare: 0 | 0.5;
  connections: number;
  seconds: number;
  warmupSeconds: number;
  runId: string;
}): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'planfence-etcd-'));
  const [client, peer] = [await freePort(), await freePort()];
  const etcd: ChildProcess = spawn(
    'etcd',
    [
      '--name',
      'bench',
      '--data-dir',
      dir,
      '--listen-client-urls',
      `http://127.0.0.1:${client}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${client}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${peer}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${peer}`,
      '--initial-cluster',
      `bench=http://127.0.0.1:${peer}`,
      '--log-level',
      'error',
    ],
    { stdio: 'ignore' },
  );
  const etcdClient = new Etcd3({ hosts: `127.0.0.1:${client}` });
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await etcdClient.put('bench/fence').value(pad(2));
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    let n = 0;
    const run = await closedLoop(
      options.connections,
      options.seconds,
      async () => {
        n++;
        const stale = options.staleShare > 0 && n % 2 === 0;
        const generation = stale ? 1 : 2;
        const id = `bench@${generation}.${options.runId}-${n}`;
        const result = await etcdClient
          // fence <= generation, i.e. fence < generation + 1
          .if('bench/fence', 'Value', '<', pad(generation + 1))
          .then(
            etcdClient.put('bench/fence').value(pad(generation)),
            etcdClient.put(`bench/plans/${id}`).value('x'.repeat(300)),
            etcdClient.put('bench/current').value(id),
          )
          .else(etcdClient.get('bench/fence'))
          .commit();
        return result.succeeded ? 'ok' : 'STALE_GENERATION';
      },
      { seconds: options.warmupSeconds },
      etcd.pid,
    );
    return { ...run, peakRssMb: etcd.pid ? peakRssMb(etcd.pid) : null };
  } finally {
    etcdClient.close();
    const exited = new Promise((resolve) => etcd.once('exit', resolve));
    etcd.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}
