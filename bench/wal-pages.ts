/**
 * What a SQLite commit writes, by table and index: the built service publishes at
 * `--connections` (default 10) for `--seconds` (default 2) with only its connection's own
 * checkpoint (at 1,000 pages), is killed, and the frames of its WAL (what the commits since
 * the last checkpoint appended, one page each) are counted by the table or index that owns
 * each page in the database they make. `--captures` (default 4) such runs per environment
 * count, on fresh copies of one prepared database, summed.
 *
 *   npm run bench:wal [-- --environments 1,100 --captures 4]
 *
 * A page that several commits change is a frame of each. Publishes over one environment
 * append to the same leaf of each index; spread over many environments, a commit's writes
 * land on as many leaves of each index that starts with the environment.
 */
import Database from 'better-sqlite3';
import autocannon from 'autocannon';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { option, ServiceProcess, textOption } from '../test/fault/service.js';
import {
  commitCounters,
  copyDatabase,
  fencedPublish,
  manyEnvironments,
  prepareTemplate,
  removeDatabase,
  runDatabase,
  UNLIMITED,
} from './http.js';

const argv = process.argv.slice(2);
const counts = (textOption(argv, 'environments') ?? '1,100').split(',').map(Number);
const captures = option(argv, 'captures', 4);
const seconds = option(argv, 'seconds', 2);
const connections = option(argv, 'connections', 10);

interface Capture {
  commits: number;
  writes: number;
  pages: Map<string, number>;
}

/** The committed frames of the WAL's current generation: each one's page number. */
function committedFrames(wal: Buffer): { pages: number[]; commits: number } {
  const pageSize = wal.readUInt32BE(8);
  const [salt1, salt2] = [wal.readUInt32BE(16), wal.readUInt32BE(20)];
  const pages: number[] = [];
  let committed = 0;
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salt1 || wal.readUInt32BE(at + 12) !== salt2) break;
    pages.push(wal.readUInt32BE(at));
    // A commit's last frame holds the database's size after it.
    if (wal.readUInt32BE(at + 4) !== 0) {
      committed = pages.length;
      commits++;
    }
  }
  return { pages: pages.slice(0, committed), commits };
}

/** Which table or index owns each page of the database `file` (with its WAL) makes. */
function owners(file: string, dir: string): Map<number, string> {
  const copy = join(dir, 'owners.db');
  copyDatabase(file, copy);
  const db = new Database(copy);
  try {
    const rows = db.prepare('SELECT name, pageno, pagetype FROM dbstat').all() as {
      name: string;
      pageno: number;
      pagetype: string;
    }[];
    return new Map(
      rows.map(({ name, pageno, pagetype }) => [
        pageno,
        pagetype === 'overflow' ? `${name} (overflow)` : name,
      ]),
    );
  } finally {
    db.close();
    removeDatabase(copy);
  }
}

async function capture(count: number, dir: string): Promise<Capture> {
  const template = await prepareTemplate(dir, `wal-${count}`, { count, requireApproval: false });
  const total: Capture = { commits: 0, writes: 0, pages: new Map() };
  for (let run = 0; run < captures; run++) {
    const runId = `${count}-${run}`;
    const { location, remove } = await runDatabase(template, dir, runId);
    const service = new ServiceProcess(location, {
      ...UNLIMITED,
      PLANFENCE_SQLITE_CHECKPOINT_MS: '0',
    });
    try {
      await service.start();
      const requests = (count === 1 ? fencedPublish(0) : manyEnvironments)(template, runId);
      await autocannon({
        url: `${service.url}/graphql`,
        connections,
        duration: seconds,
        requests,
      });
      const { writes, transactions } = await commitCounters([service.url]);
      await service.crash();
      const { pages, commits } = committedFrames(readFileSync(`${location}-wal`));
      const owner = owners(location, dir);
      total.commits += commits;
      total.writes += transactions ? (writes / transactions) * commits : 0;
      for (const page of pages) {
        const name = owner.get(page) ?? 'free pages';
        total.pages.set(name, (total.pages.get(name) ?? 0) + 1);
      }
    } finally {
      await service.crash();
      await remove();
    }
  }
  return total;
}

const dir = mkdtempSync(join(os.tmpdir(), 'planfence-wal-'));
try {
  const results = new Map<number, Capture>();
  for (const count of counts) {
    results.set(count, await capture(count, dir));
    console.error(`${count} environment(s): ${results.get(count)!.commits} commits counted`);
  }
  const names = new Set([...results.values()].flatMap((c) => [...c.pages.keys()]));
  const perCommit = (c: Capture, name: string) => (c.pages.get(name) ?? 0) / (c.commits || 1);
  const first = results.get(counts[0])!;
  const rows = [...names].sort((a, b) => perCommit(first, b) - perCommit(first, a));
  const head = counts.map((count) => `${count} environment${count === 1 ? '' : 's'}`);
  console.log(`WAL pages per commit, publishes at c=${connections} (FULL), by table or index:\n`);
  console.log(`| table or index | ${head.join(' | ')} |`);
  console.log(`|---|${counts.map(() => '--:').join('|')}|`);
  for (const name of rows)
    console.log(
      `| ${name} | ${counts.map((n) => perCommit(results.get(n)!, name).toFixed(2)).join(' | ')} |`,
    );
  const all = (c: Capture) => [...c.pages.values()].reduce((a, b) => a + b, 0) / (c.commits || 1);
  console.log(`| **all** | ${counts.map((n) => all(results.get(n)!).toFixed(1)).join(' | ')} |`);
  console.log(
    `| commits counted (writes per commit) | ${counts
      .map((n) => {
        const c = results.get(n)!;
        return `${c.commits} (${(c.writes / (c.commits || 1)).toFixed(1)})`;
      })
      .join(' | ')} |`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
