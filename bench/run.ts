/**
 * planfence benchmarks, side by side in one run.
 *
 *   npm run bench                                # everything, writes docs/BENCHMARKS.md
 *   npm run bench -- --only 1,2,6 --seconds 3 --runs 1 --out /tmp/b.md   # a quick look
 *
 * Every row runs `--runs` times (default 3) and the report shows medians; the runs are
 * interleaved (round 1 of every row, then round 2, ...) so that a slow moment of this
 * shared machine does not fall on one scenario only. Load comes from this process over
 * loopback (autocannon); each HTTP run starts the built service on a fresh copy of a
 * database prepared through the API.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  fdatasyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import { option, textOption } from '../test/fault/service.js';
import { etcdVersion, runEtcd } from './etcd.js';
import {
  approvalPath,
  fencedPublish,
  manyEnvironments,
  prepareTemplate,
  runHttp,
  type Template,
  whoami,
} from './http.js';
import type { Row, Run } from './measure.js';
import { report } from './report.js';
import { seedHistory } from './seed.js';
import { runStorageFloor } from './storage-floor.js';

const argv = process.argv.slice(2);
const seconds = option(argv, 'seconds', 5);
const runs = option(argv, 'runs', 3);
const only = new Set((textOption(argv, 'only') ?? '1,2,3,4,5,6,7').split(',').map(Number));
const connectionCounts = (textOption(argv, 'connections') ?? '1,10,50').split(',').map(Number);
const growthSizes = (textOption(argv, 'growth') ?? '1000,100000,1000000').split(',').map(Number);
const out = textOption(argv, 'out') ?? 'docs/BENCHMARKS.md';
const DURABILITIES = ['FULL', 'NORMAL'] as const;

interface Planned extends Omit<Row, 'runs'> {
  run: (runId: string) => Promise<Run>;
}

function log(line: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

/** Synchronous 4 KiB writes per second on the disk the databases live on: what bounds FULL. */
function fsyncsPerSecond(dir: string): number {
  const file = join(dir, 'fsync-probe');
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(4096, 1);
  let n = 0;
  const deadline = performance.now() + 2000;
  while (performance.now() < deadline) {
    writeSync(fd, block, 0, block.length, 0);
    fdatasyncSync(fd);
    n++;
  }
  closeSync(fd);
  rmSync(file);
  return n / 2;
}

async function main(): Promise<void> {
  const workDir = mkdtempSync(join(os.tmpdir(), 'planfence-bench-'));
  const started = Date.now();
  const templates = new Map<string, Template>();
  const template = async (name: string, make: () => Promise<Template>) => {
    if (!templates.has(name)) {
      log(`preparing database "${name}"`);
      templates.set(name, await make());
    }
    return templates.get(name)!;
  };
  const publishTemplate = () =>
    template('publish', () =>
      prepareTemplate(workDir, 'publish', { count: 1, requireApproval: false }),
    );

  const planned: Planned[] = [];
  const etcd = etcdVersion();
  if (only.has(7) && !etcd) log('no etcd binary on PATH: scenario 7 is skipped');
  const http = (
    row: Omit<Row, 'runs'>,
    make: () => Promise<Template>,
    requests: Parameters<typeof runHttp>[0]['requests'],
    durability: 'FULL' | 'NORMAL' = 'FULL',
  ) =>
    planned.push({
      ...row,
      run: async (runId) =>
        runHttp({
          template: await make(),
          requests,
          durability,
          connections: row.connections,
          seconds,
          runId,
          workDir,
        }),
    });

  for (const connections of connectionCounts) {
    if (only.has(1))
      http(
        { scenario: '1 framework floor', variant: 'whoami', durability: 'FULL', connections },
        publishTemplate,
        whoami,
      );
    for (const durability of DURABILITIES) {
      for (const stale of [0, 0.5] as const) {
        const variant = `${stale * 100}% stale`;
        if (only.has(2))
          http(
            { scenario: '2 fenced publish', variant, durability, connections },
            publishTemplate,
            fencedPublish(stale),
            durability,
          );
        if (only.has(6))
          planned.push({
            scenario: '6 storage floor',
            variant,
            durability,
            connections,
            run: async (runId) =>
              runStorageFloor({
                template: await publishTemplate(),
                staleShare: stale,
                durability,
                connections,
                seconds,
                runId,
                workDir,
              }),
          });
      }
      if (only.has(3))
        http(
          { scenario: '3 approval path', variant: 'submit + approve', durability, connections },
          () =>
            template('approval', () =>
              prepareTemplate(workDir, 'approval', { count: 200, requireApproval: true }),
            ),
          approvalPath,
          durability,
        );
    }
    if (only.has(4))
      http(
        {
          scenario: '4 many environments',
          variant: '1,000 environments',
          durability: 'FULL',
          connections,
        },
        () =>
          template('many', () =>
            prepareTemplate(workDir, 'many', { count: 1000, requireApproval: false }),
          ),
        manyEnvironments,
      );
    if (only.has(5))
      for (const size of growthSizes)
        http(
          {
            scenario: '5 growth',
            variant: `${size.toLocaleString('en')} plans stored`,
            durability: 'FULL',
            connections,
          },
          () =>
            template(`growth-${size}`, () =>
              prepareTemplate(workDir, `growth${size}`, {
                count: 1,
                requireApproval: false,
                seed: (file) => seedHistory(file, `growth${size}-0`, size),
              }),
            ),
          fencedPublish(0),
        );
    if (only.has(7)) {
      for (const stale of [0, 0.5] as const) {
        const row = {
          scenario: '7 peer: etcd',
          variant: `${stale * 100}% stale`,
          durability: 'FULL' as const,
          connections,
        };
        if (etcd)
          planned.push({
            ...row,
            run: (runId) => runEtcd({ staleShare: stale, connections, seconds, runId }),
          });
      }
    }
  }

  const results = new Map<Planned, Run[]>(planned.map((row) => [row, []]));
  const total = planned.length * runs;
  let done = 0;
  for (let round = 1; round <= runs; round++) {
    for (const row of planned) {
      const runId = `r${round}-${done}`;
      const run = await row.run(runId);
      results.get(row)!.push(run);
      done++;
      const rejected = Object.entries(run.outcomes)
        .filter(([outcome]) => outcome !== 'ok')
        .map(([outcome, count]) => `${outcome}=${count}`)
        .join(' ');
      log(
        `[${done}/${total}] ${row.scenario} · ${row.variant} · ${row.durability} · c=${row.connections}: ` +
          `${run.reqPerSec.toFixed(0)} req/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms` +
          (rejected ? ` (${rejected})` : ''),
      );
    }
  }

  const sqlite = new Sqlite(':memory:');
  const sqliteVersion = (sqlite.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
  sqlite.close();
  const cpu = os.cpus();
  const markdown = report(
    planned.map((row) => ({
      scenario: row.scenario,
      variant: row.variant,
      durability: row.durability,
      connections: row.connections,
      runs: results.get(row)!,
    })),
    {
      date: new Date().toISOString(),
      cores: `${cpu.length} × ${cpu[0]?.model ?? 'unknown'}`,
      memory: `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
      kernel: `${os.type()} ${os.release()}`,
      node: process.version,
      sqlite: sqliteVersion,
      etcd: etcd ?? 'not installed: scenario 7 skipped',
      fsyncs: fsyncsPerSecond(workDir),
      seconds,
      runs,
      command: `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
      minutes: (Date.now() - started) / 60_000,
      git: gitDescription(),
    },
  );
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(out, markdown);
  rmSync(workDir, { recursive: true, force: true });
  log(`wrote ${out} (${((Date.now() - started) / 60_000).toFixed(1)} min)`);
}

function gitDescription(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
