/**
 * planfence benchmarks, side by side in one run.
 *
 *   npm run bench                                # everything, writes docs/BENCHMARKS.md
 *   npm run bench -- --only 0,2,6 --seconds 2 --runs 1 --out /tmp/b.md   # a quick look
 *
 * Every row runs `--runs` times (default 3) and the report shows medians; the runs are
 * interleaved (round 1 of every row, then round 2, ...) so that a slow moment of this
 * shared machine does not fall on one scenario only. Load comes from this process over
 * loopback (autocannon); each HTTP run starts the built service on a fresh copy of a
 * database prepared through the API. Each run measures after `--warmup` seconds (default 3)
 * of the same load that count for nothing (scenario 10 excepted): the rows are what a
 * long-running service serves, not its first seconds (JIT, pools, caches).
 *
 * The main rows (scenario 0, the FULL fresh publish, etcd fresh) run at every count of
 * `--connections` (default 1,10,50); the others at `--secondary-connections` (default 10).
 * The PostgreSQL rows (9, and 13 through a latency proxy: `--latency MS` each way, default
 * 0.5) need a server: PLANFENCE_BENCH_POSTGRES_URL (or PLANFENCE_TEST_POSTGRES_URL), a role
 * that may create databases.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fdatasyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
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
  currentPlan,
  dropTemplate,
  fencedPublish,
  manyEnvironments,
  prepareTemplate,
  runHttp,
  type Template,
  typename,
  whoami,
} from './http.js';
import type { Row, Run } from './measure.js';
import { runPostgresFloor } from './postgres-floor.js';
import { keepHostileSection, report } from './report.js';
import { seedHistory } from './seed.js';
import { Receiver } from '../test/support/receiver.js';
import { addWebhooks, refusingUrl, runWithWebhooks, WEBHOOK_BATCHES_VARIANT } from './webhooks.js';
import { runStorageFloor } from './storage-floor.js';
import { BIG_PLANS, bigSubmits, health } from './terraform.js';
import { POLICIES } from './policy-set.js';

const argv = process.argv.slice(2);
const seconds = option(argv, 'seconds', 5);
/** Seconds of the same load before each measured run, not measured (Load.warmupSeconds). */
const warmupSeconds = option(argv, 'warmup', 3);
const runs = option(argv, 'runs', 3);
const ALL = '0,1,2,3,4,5,6,7,8,9,10,11,12,13';
const only = new Set((textOption(argv, 'only') ?? ALL).split(',').map(Number));
const numbers = (text: string) => text.split(',').map(Number);
const mainCounts = numbers(textOption(argv, 'connections') ?? '1,10,50');
const secondaryCounts = numbers(textOption(argv, 'secondary-connections') ?? '10');
const growthSizes = numbers(textOption(argv, 'growth') ?? '1000,1000000');
const out = textOption(argv, 'out') ?? 'docs/BENCHMARKS.md';
/**
 * `--baseline DIR`: a copy of another build's dist/ (e.g. `cp -r dist /tmp/base` before a
 * change); every HTTP row then runs twice in each round, once on that build ("· baseline").
 */
const baseline = textOption(argv, 'baseline');
/**
 * `--baseline-flags "FLAGS"`: every HTTP row also runs this build's service with these Node
 * flags in place of `npm start`'s ("· Node flags: FLAGS"; "" for Node's defaults), e.g.
 * `--max-semi-space-size=4` (docs/operations.md#memory).
 */
const baselineFlags = textOption(argv, 'baseline-flags');
/**
 * `--baseline-env "NAME=VALUE ..."`: every HTTP row also runs this build's service with these
 * variables added to its environment ("· env: NAME=VALUE ..."), e.g. glibc's
 * `MALLOC_ARENA_MAX=2` or a planfence setting.
 */
const baselineEnv = textOption(argv, 'baseline-env');
/** Scenario 13: what the latency proxy holds each chunk, each way (ms). */
const latencyMs = Number(textOption(argv, 'latency') ?? 0.5);
const postgresServer =
  textOption(argv, 'postgres') ??
  process.env.PLANFENCE_BENCH_POSTGRES_URL ??
  process.env.PLANFENCE_TEST_POSTGRES_URL ??
  null;

/** The storage floor's variant with the statement changes of the prototype (storage-floor.ts). */
export const MERGED = '0% stale, 7 statements (prototype)';

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

/** The databases prepared by this run, dropped at its end, also when it fails. */
const templates = new Map<string, Promise<Template>>();

async function dropTemplates(): Promise<void> {
  for (const made of templates.values()) await made.then(dropTemplate).catch(() => undefined);
  templates.clear();
}

async function main(): Promise<void> {
  const workDir = mkdtempSync(join(os.tmpdir(), 'planfence-bench-'));
  const started = Date.now();
  /** A database prepared once per run of the bench (on first use), copied for every row's run. */
  const template = (name: string, make: () => Promise<Template>) => () => {
    if (!templates.has(name)) {
      log(`preparing database "${name}"`);
      templates.set(name, make());
    }
    return templates.get(name)!;
  };
  const publishTemplate = template('publish', () =>
    prepareTemplate(workDir, 'publish', { count: 1, requireApproval: false }),
  );
  const policiesTemplate = template('policies', () =>
    prepareTemplate(workDir, 'policies', {
      count: 1,
      requireApproval: false,
      planPolicies: POLICIES,
    }),
  );
  const approvalTemplate = (approvals: number, postgres?: string) =>
    template(`approval${approvals}${postgres ? 'pg' : ''}`, () =>
      prepareTemplate(workDir, `approval${approvals}${postgres ? 'pg' : ''}`, {
        count: 200,
        requireApproval: true,
        approvals,
        postgres,
      }),
    );

  const planned: Planned[] = [];
  // Scenario 10's receiver: in this process, on one port for the whole run.
  const receiver = new Receiver();
  receiver.keep = false;
  if (only.has(10)) await receiver.start();
  const webhookTemplate = (
    name: string,
    webhooks: number,
    url: () => Promise<string>,
    batchSize = 1,
  ) =>
    template(name, async () => {
      const prepared = await prepareTemplate(workDir, name, { count: 1, requireApproval: false });
      await addWebhooks(prepared, webhooks, await url(), batchSize);
      return prepared;
    });
  const etcd = etcdVersion();
  if (only.has(7) && !etcd) log('no etcd binary on PATH: scenario 7 is skipped');
  for (const scenario of [9, 13])
    if (only.has(scenario) && !postgresServer)
      log(
        `no PLANFENCE_BENCH_POSTGRES_URL (or PLANFENCE_TEST_POSTGRES_URL): scenario ${scenario} is skipped`,
      );
  const http = (
    row: Omit<Row, 'runs'>,
    make: () => Promise<Template>,
    requests: Parameters<typeof runHttp>[0]['requests'],
    extra: Partial<Parameters<typeof runHttp>[0]> = {},
  ) => {
    const variants: { label: string; env: Record<string, string> }[] = [{ label: '', env: {} }];
    if (baseline)
      variants.push({
        label: ' · baseline',
        env: { PLANFENCE_SERVICE_ENTRY: join(baseline, 'src/main.js') },
      });
    if (baselineFlags !== null)
      variants.push({
        label: ` · Node flags: ${baselineFlags || 'none'}`,
        env: { PLANFENCE_SERVICE_NODE_FLAGS: baselineFlags },
      });
    if (baselineEnv !== null)
      variants.push({
        label: ` · env: ${baselineEnv}`,
        env: Object.fromEntries(
          baselineEnv
            .split(' ')
            .filter(Boolean)
            .map((pair) => {
              const at = pair.indexOf('=');
              if (at < 1) throw new Error(`--baseline-env: ${pair} is not NAME=VALUE`);
              return [pair.slice(0, at), pair.slice(at + 1)];
            }),
        ),
      });
    for (const variant of variants)
      planned.push({
        ...row,
        variant: `${row.variant}${variant.label}`,
        run: async (runId) =>
          runHttp({
            template: await make(),
            requests,
            durability: row.durability === 'NORMAL' ? 'NORMAL' : 'FULL',
            connections: row.connections,
            seconds,
            warmupSeconds,
            runId,
            workDir,
            ...extra,
            env: { ...extra.env, ...variant.env },
          }),
      });
  };
  const storageFloor = (
    variant: string,
    durability: 'FULL' | 'NORMAL',
    connections: number,
    stale: 0 | 0.5,
    merged = false,
  ) =>
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
          warmupSeconds,
          runId,
          workDir,
          merged,
        }),
    });

  /**
   * The scenarios by number, each adding its rows. A new scenario takes the next number
   * here, in ALL above and (for its targets) in report.ts.
   */
  const scenarios: Record<number, () => void> = {
    0: () => {
      for (const connections of mainCounts)
        http(
          {
            scenario: '0 framework floor',
            variant: '{ __typename }',
            durability: '—',
            connections,
          },
          publishTemplate,
          typename,
        );
    },
    1: () => {
      for (const connections of secondaryCounts)
        http(
          { scenario: '1 authenticated floor', variant: 'whoami', durability: '—', connections },
          publishTemplate,
          whoami,
        );
    },
    2: () => {
      for (const durability of ['FULL', 'NORMAL'] as const)
        for (const stale of [0, 0.5] as const) {
          const counts = durability === 'FULL' && stale === 0 ? mainCounts : secondaryCounts;
          for (const connections of counts)
            http(
              {
                scenario: '2 fenced publish',
                variant: `${stale * 100}% stale`,
                durability,
                connections,
              },
              publishTemplate,
              fencedPublish(stale),
            );
        }
    },
    3: () => {
      for (const connections of secondaryCounts) {
        for (const durability of ['FULL', 'NORMAL'] as const)
          http(
            { scenario: '3 approval path', variant: 'submit + approve', durability, connections },
            approvalTemplate(1),
            approvalPath,
          );
        http(
          {
            scenario: '3 approval path',
            variant: 'submit + 3 approvals (quorum of 3)',
            durability: 'FULL',
            connections,
          },
          approvalTemplate(3),
          approvalPath,
        );
      }
    },
    4: () => {
      for (const connections of secondaryCounts)
        for (const count of [100, 1000])
          http(
            {
              scenario: '4 many environments',
              variant: `${count.toLocaleString('en')} environments`,
              durability: 'FULL',
              connections,
            },
            template(`many-${count}`, () =>
              prepareTemplate(workDir, `many-${count}`, { count, requireApproval: false }),
            ),
            manyEnvironments,
          );
    },
    5: () => {
      for (const connections of secondaryCounts)
        for (const size of growthSizes)
          http(
            {
              scenario: '5 growth',
              variant: `${size.toLocaleString('en')} plans stored`,
              durability: 'FULL',
              connections,
            },
            template(`growth-${size}`, () =>
              prepareTemplate(workDir, `growth${size}`, {
                count: 1,
                requireApproval: false,
                seed: (file) => seedHistory(file, `growth${size}-0`, size),
              }),
            ),
            fencedPublish(0),
          );
    },
    6: () => {
      for (const connections of secondaryCounts)
        for (const durability of ['FULL', 'NORMAL'] as const)
          for (const stale of [0, 0.5] as const)
            storageFloor(`${stale * 100}% stale`, durability, connections, stale);
      // What the guard's statements would cost merged (a prototype; the service does not run it).
      for (const connections of secondaryCounts)
        for (const durability of ['FULL', 'NORMAL'] as const)
          storageFloor(MERGED, durability, connections, 0, true);
    },
    7: () => {
      if (!etcd) return;
      for (const stale of [0, 0.5] as const)
        for (const connections of stale === 0 ? mainCounts : secondaryCounts)
          planned.push({
            scenario: '7 peer: etcd',
            variant: `${stale * 100}% stale`,
            durability: 'FULL',
            connections,
            run: (runId) =>
              runEtcd({ staleShare: stale, connections, seconds, warmupSeconds, runId }),
          });
    },
    8: () => {
      for (const connections of secondaryCounts) {
        http(
          { scenario: '8 reads', variant: 'currentPlan alone', durability: 'FULL', connections },
          publishTemplate,
          currentPlan,
        );
        http(
          {
            scenario: '8 reads',
            variant: `currentPlan while ${connections} connections publish`,
            durability: 'FULL',
            connections,
          },
          publishTemplate,
          currentPlan,
          { background: { requests: fencedPublish(0), connections, unit: 'publishes' } },
        );
      }
    },
    9: () => {
      if (!postgresServer) return;
      const postgres = postgresServer;
      const pgPublish = template('publish-pg', () =>
        prepareTemplate(workDir, 'publishpg', { count: 1, requireApproval: false, postgres }),
      );
      const pgSpread = template('spread-pg', () =>
        prepareTemplate(workDir, 'spreadpg', { count: 100, requireApproval: false, postgres }),
      );
      for (const connections of secondaryCounts) {
        const row = { scenario: '9 PostgreSQL', durability: 'FULL' as const, connections };
        http({ ...row, variant: 'publish, 1 instance' }, pgPublish, fencedPublish(0));
        http({ ...row, variant: 'publish, 2 instances' }, pgPublish, fencedPublish(0), {
          instances: 2,
        });
        // One environment serializes its publishes on its row; spread, instances can add up.
        for (const instances of [1, 2])
          http(
            {
              ...row,
              variant: `publish over 100 environments, ${instances} instance${instances > 1 ? 's' : ''}`,
            },
            pgSpread,
            manyEnvironments,
            { instances },
          );
        http(
          { ...row, variant: 'submit + approve, 1 instance' },
          approvalTemplate(1, postgres),
          approvalPath,
        );
        planned.push({
          ...row,
          variant: 'node-pg bare conditional UPDATE (floor)',
          run: async (runId) =>
            runPostgresFloor({
              template: await pgPublish(),
              connections,
              seconds,
              warmupSeconds,
              runId,
              workDir,
            }),
        });
      }
    },
    10: () => {
      const variants = [
        { variant: '0 webhooks', templateName: 'none', webhooks: 0, up: true },
        {
          variant: '3 webhooks, receiver up (the service also sends)',
          templateName: 'up',
          webhooks: 3,
          up: true,
        },
        {
          variant: WEBHOOK_BATCHES_VARIANT,
          templateName: 'batches',
          webhooks: 3,
          up: true,
        },
        {
          variant: '3 webhooks, receiver down (the outbox writes only)',
          templateName: 'down',
          webhooks: 3,
          up: false,
        },
      ] as const;
      const templates = {
        none: webhookTemplate('hooks0', 0, () => Promise.resolve(receiver.url)),
        up: webhookTemplate('hooks3up', 3, () => Promise.resolve(receiver.url)),
        batches: webhookTemplate('hooks3batch', 3, () => Promise.resolve(receiver.url), 50),
        down: webhookTemplate('hooks3down', 3, refusingUrl),
      };
      for (const connections of secondaryCounts)
        for (const { variant, templateName, webhooks, up } of variants)
          planned.push({
            scenario: '10 webhooks',
            variant,
            durability: 'FULL',
            connections,
            run: async (runId) =>
              runWithWebhooks({
                template: await templates[templateName](),
                webhooks,
                receiver: up ? receiver : null,
                durability: 'FULL',
                connections,
                seconds,
                // Cold: the deliveries counted are those of the measured publishes only.
                warmupSeconds: 0,
                runId,
                workDir,
              }),
          });
    },
    11: () => {
      for (const connections of secondaryCounts) {
        const row = { scenario: '11 Terraform plans', durability: 'FULL' as const, connections };
        http({ ...row, variant: 'submit 1 MiB as TEXT' }, publishTemplate, bigSubmits('TEXT'), {
          env: BIG_PLANS,
        });
        http(
          { ...row, variant: 'submit 1 MiB as TERRAFORM_PLAN_JSON (validated, summarised)' },
          publishTemplate,
          bigSubmits('TERRAFORM_PLAN_JSON'),
          { env: BIG_PLANS },
        );
        http({ ...row, variant: 'GET /health alone' }, publishTemplate, health);
        for (const contentType of ['TEXT', 'TERRAFORM_PLAN_JSON'] as const)
          http(
            {
              ...row,
              variant: `GET /health while ${connections} connections submit 1 MiB ${contentType} plans`,
            },
            publishTemplate,
            health,
            {
              env: BIG_PLANS,
              background: {
                requests: bigSubmits(contentType),
                connections,
                unit: `1 MiB ${contentType} submits`,
              },
            },
          );
      }
    },
    12: () => {
      // What plan policies cost: the same 1 MiB Terraform submit, one at a time, without and
      // with ten policies (evaluated in the policy worker, whose CPU is the service's).
      const row = { scenario: '12 plan policies', durability: 'FULL' as const, connections: 1 };
      for (const [count, made] of [
        [0, publishTemplate],
        [POLICIES.length, policiesTemplate],
      ] as const)
        http(
          { ...row, variant: `submit 1 MiB TERRAFORM_PLAN_JSON, ${count} policies` },
          made,
          bigSubmits('TERRAFORM_PLAN_JSON'),
          { env: BIG_PLANS },
        );
    },
    13: () => {
      // PostgreSQL across a network: the same decisions through a proxy that holds each
      // chunk `--latency` ms each way, and the round trips each request costs.
      if (!postgresServer) return;
      const postgres = postgresServer;
      const pgPublish = template('publish-pg', () =>
        prepareTemplate(workDir, 'publishpg', { count: 1, requireApproval: false, postgres }),
      );
      for (const connections of [1, 10]) {
        const row = { scenario: '13 PostgreSQL, remote', durability: 'FULL' as const, connections };
        http(
          { ...row, variant: `publish, ${latencyMs} ms each way` },
          pgPublish,
          fencedPublish(0),
          {
            latencyMs,
          },
        );
        http(
          { ...row, variant: `submit + approve, ${latencyMs} ms each way` },
          approvalTemplate(1, postgres),
          approvalPath,
          { latencyMs },
        );
      }
    },
  };
  for (const [number, add] of Object.entries(scenarios)) if (only.has(Number(number))) add();

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
      postgres: postgresServer ? await postgresDescription(postgresServer) : null,
      mainCounts,
      secondaryCounts,
      growthSizes,
      fsyncs: fsyncsPerSecond(workDir),
      seconds,
      warmupSeconds,
      runs,
      command: `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
      minutes: (Date.now() - started) / 60_000,
      git: gitDescription(),
    },
  );
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(
    out,
    keepHostileSection(markdown, existsSync(out) ? readFileSync(out, 'utf8') : ''),
  );
  await dropTemplates();
  await receiver.stop();
  rmSync(workDir, { recursive: true, force: true });
  log(`wrote ${out} (${((Date.now() - started) / 60_000).toFixed(1)} min)`);
}

/** The server's version and the settings that decide what a commit costs there. */
async function postgresDescription(server: string): Promise<string> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    const value = async (sql: string) =>
      Object.values((await client.query(sql)).rows[0] as Record<string, string>)[0];
    const version = (await value('SHOW server_version')).split(' ')[0];
    return `PostgreSQL ${version} on the same machine (synchronous_commit=${await value('SHOW synchronous_commit')}, fsync=${await value('SHOW fsync')})`;
  } finally {
    await client.end();
  }
}

function gitDescription(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

main().catch(async (error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  await dropTemplates();
  process.exit(1);
});
