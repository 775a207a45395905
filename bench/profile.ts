/**
 * Where a publish spends its time: the built service under `node --cpu-prof`, a fenced
 * publish (FULL, fresh keys, one environment) at `--connections` (default 10) for
 * `--seconds` (default 10), then the profile's self time summed by function and by area.
 *
 *   npm run bench:profile [-- --seconds 10 --connections 10 --out docs/BENCHMARKS.md --keep /tmp/p]
 *   npm run bench:profile -- --postgres postgres://USER:PASSWORD@HOST/postgres --connections 1
 *
 * Writes the section between `<!-- profile:start -->` and `<!-- profile:end -->` of the
 * report (`npm run bench` keeps it), for SQLite; `--postgres URL` profiles the publish on a
 * database made on that server instead and only prints the summary. `--keep DIR` leaves the
 * .cpuprofile there (open it in Chrome DevTools or speedscope). Only the samples taken while
 * the measured load ran count: not the start-up, not the `--warmup` seconds (default 3) of the
 * same load before it, not the shutdown.
 */
import autocannon from 'autocannon';
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import {
  ADMIN_TOKEN,
  distFile,
  freePort,
  option,
  startFlags,
  textOption,
} from '../test/fault/service.js';
import {
  dropTemplate,
  fencedPublish,
  manyEnvironments,
  prepareTemplate,
  runDatabase,
  type Template,
  typename,
  UNLIMITED,
  whoami,
} from './http.js';
import { BIG_PLANS, bigSubmits } from './terraform.js';
import { addOutcome, graphqlOutcome } from './measure.js';
import { replaceSection } from './report.js';

const NOTE =
  "better-sqlite3 runs a statement synchronously, so SQLite's own work (and a COMMIT's fsync) is the self time of the JavaScript frame that calls it: `query` of TypeORM's BetterSqlite3QueryRunner (TypeORM's reads, BEGIN, COMMIT) and the two anonymous frames of src/database/database.js (the `run` of `execute`, the `all` of `select`). To reproduce and explore: `npm run bench:profile -- --keep /tmp/profile`, then open the .cpuprofile in Chrome DevTools or speedscope.";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds of the monotonic clock that process.hrtime reads too (Linux). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Now on the profile's clock, in microseconds. */
const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);

const argv = process.argv.slice(2);
const seconds = option(argv, 'seconds', 10);
/** Seconds of the same load before the profiled ones (bench/measure.ts Load.warmupSeconds). */
const warmupSeconds = option(argv, 'warmup', 3);
const connections = option(argv, 'connections', 10);
const out = textOption(argv, 'out') ?? 'docs/BENCHMARKS.md';
const keep = textOption(argv, 'keep');
/** A PostgreSQL server URL: profile the publish on PostgreSQL instead of SQLite (printed, not written to the report). */
const postgres = textOption(argv, 'postgres');
/** `--plan TEXT|TERRAFORM_PLAN_JSON`: profile submits of the benchmarks' 1 MiB plan instead (printed only). */
const plan = textOption(argv, 'plan') as 'TEXT' | 'TERRAFORM_PLAN_JSON' | null;
if (plan !== null && plan !== 'TEXT' && plan !== 'TERRAFORM_PLAN_JSON')
  throw new Error('--plan is TEXT or TERRAFORM_PLAN_JSON');
/** `--environments N`: publishes spread at random over N environments (scenario 4's load; printed only). */
const environments = option(argv, 'environments', 1);
/** The requests `--request` may name: scenario 1's and scenario 0's. */
const FLOORS = { whoami, typename };
/** `--request whoami|typename`: profile that request instead of a publish (printed only). */
const request = textOption(argv, 'request') as keyof typeof FLOORS | null;
if (request !== null && !Object.hasOwn(FLOORS, request))
  throw new Error('--request is whoami or typename');
/** What one measured request is, in the section's words. */
const what = request ? `\`${request}\`` : 'publish';

/** The area a frame belongs to: a package, a folder of ours, Node itself, or V8's own buckets. */
function area(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const ours = /\/dist\/src\/([^/]+)\//.exec(url);
  if (ours) return `src/${ours[1]}`;
  if (url.startsWith('node:')) return 'node internals';
  return url.replace(/^file:\/\/.*\/dist\//, '');
}

/** The samples taken while the load ran (`from`–`to`, monotonic µs): not the start-up, not the shutdown. */
function summarize(
  profile: CpuProfile,
  from: number,
  to: number,
): {
  total: number;
  byArea: Map<string, number>;
  byFunction: Map<string, number>;
} {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at > from && at <= to) self.set(id, (self.get(id) ?? 0) + delta);
  });
  const byArea = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const [id, micros] of self) {
    const { callFrame } = nodes.get(id)!;
    total += micros;
    const where = area(callFrame.url, callFrame.functionName);
    byArea.set(where, (byArea.get(where) ?? 0) + micros);
    const file = callFrame.url.replace(/^.*\/(node_modules|dist)\//, '').replace(/^node:/, 'node:');
    const key =
      `\`${callFrame.functionName || '(anonymous)'}\` ${file ? `${file}:${callFrame.lineNumber + 1}` : ''}`.trim();
    byFunction.set(key, (byFunction.get(key) ?? 0) + micros);
  }
  return { total, byArea, byFunction };
}

async function main(): Promise<void> {
  const workDir = mkdtempSync(join(os.tmpdir(), 'planfence-profile-'));
  const profileDir = keep ?? join(workDir, 'profile');
  mkdirSync(profileDir, { recursive: true });
  const earlier = new Set(readdirSync(profileDir));
  let template: Template | undefined;
  try {
    template = await prepareTemplate(workDir, 'profile', {
      count: environments,
      requireApproval: false,
      postgres: postgres ?? undefined,
    });
    const database = await runDatabase(template, workDir, 'profile');
    const port = await freePort();
    const child: ChildProcess = spawn(
      process.execPath,
      [...startFlags(), '--cpu-prof', '--cpu-prof-dir', profileDir, distFile('src/main.js')],
      {
        env: {
          ...process.env,
          ...UNLIMITED,
          ...BIG_PLANS,
          PORT: String(port),
          DATABASE_URL: postgres ? database.location : `sqlite:${database.location}`,
          PLANFENCE_ADMIN_TOKEN: ADMIN_TOKEN,
          PLANFENCE_SQLITE_SYNCHRONOUS: 'FULL',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    const url = `http://127.0.0.1:${port}`;
    for (let ready = false; !ready;) {
      ready = await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const outcomes: Record<string, number> = {};
    const load = (runId: string, duration: number, count: Record<string, number>) =>
      autocannon({
        url,
        connections,
        duration,
        requests: (plan
          ? bigSubmits(plan)
          : request
            ? FLOORS[request]
            : environments > 1
              ? manyEnvironments
              : fencedPublish(0))(
          template!,
          runId,
        ).map((one) => ({
          ...one,
          onResponse: (status: number, body: string) =>
            addOutcome(count, graphqlOutcome(status, body)),
        })),
      });
    // The same load first, outside the samples counted: a warm service's profile.
    if (warmupSeconds > 0) await load('profile-warm', warmupSeconds, {});
    const loadFrom = monotonicMicros();
    const result = await load('profile', seconds, outcomes);
    const loadTo = monotonicMicros();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    await database.remove();
    // The one this run wrote: a kept folder may hold the profiles of earlier runs.
    const file = readdirSync(profileDir).find(
      (name) => name.endsWith('.cpuprofile') && !earlier.has(name),
    );
    if (!file) throw new Error('the service wrote no .cpuprofile');
    const { total, byArea, byFunction } = summarize(
      JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile,
      loadFrom,
      loadTo,
    );
    const requests = result.requests.total;
    const busy = total - (byArea.get('(idle)') ?? 0);
    const ms = (micros: number) => (micros / 1000 / requests).toFixed(3);
    const pct = (micros: number) => ((micros / busy) * 100).toFixed(1);
    const top = (map: Map<string, number>, n: number) =>
      [...map]
        .filter(([key]) => !key.includes('(idle)'))
        .sort((a, b) => b[1] - a[1])
        .slice(0, n);
    const section = [
      '<!-- profile:start -->',
      '## Where a publish spends its time',
      '',
      `\`npm run bench:profile -- --seconds ${seconds} --connections ${connections}\` (after ${warmupSeconds} s of the same load, not counted) on ${new Date().toISOString().slice(0, 10)}: ` +
        `the built service under \`node --cpu-prof\` (the profiler itself costs some throughput), ${request ? what : 'a fenced publish'} ` +
        `(${postgres ? 'PostgreSQL' : 'FULL'}${request ? '' : `, fresh idempotency keys, ${environments > 1 ? `spread at random over ${environments} environments` : 'one environment'}${plan ? `, the 1 MiB plan as ${plan}` : ''}`}) at ${connections} connections for ${seconds} s: ` +
        `${requests} requests (${(requests / result.duration).toFixed(0)}/s; ${Object.entries(
          outcomes,
        )
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}). ` +
        `The service thread was busy ${((busy / (total || 1)) * 100).toFixed(0)}% of the run (the samples taken while the measured load ran: not the start-up or the warm-up); ` +
        `${ms(busy)} ms of its time per ${what}. Self time (a function's own, not its callees'), per ${what} and as a share of the busy time:`,
      '',
      `| area | ms / ${what} | share |`,
      '|---|--:|--:|',
      ...top(byArea, 18).map(([key, v]) => `| ${key} | ${ms(v)} | ${pct(v)}% |`),
      '',
      `| function (self time) | ms / ${what} | share |`,
      '|---|--:|--:|',
      ...top(byFunction, 25).map(
        ([key, v]) => `| ${key.replace(/\|/g, '\\|')} | ${ms(v)} | ${pct(v)}% |`,
      ),
      '',
      NOTE,
      '',
      '<!-- profile:end -->',
    ].join('\n');
    const existing = existsSync(out) ? readFileSync(out, 'utf8') : '';
    if (!postgres && !plan && !request && environments === 1)
      writeFileSync(out, replaceSection(existing, 'profile', section));
    process.stdout.write(`${section}\n`);
  } finally {
    // On PostgreSQL the template is a database of its own.
    if (template) await dropTemplate(template).catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
