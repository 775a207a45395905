/**
 * `npm run bench:webhooks` (this file run directly): whether deliveries keep pace with a
 * burst of publishes; see runBurst and main below.
 *
 * Scenario 10 of bench/run.ts: what events that leave the process cost a decision. The same fenced publish
 * as scenario 2 with 0 and with 3 webhooks configured (each wanting every event type, so a
 * publish queues 2 events × 3 deliveries in its transaction), once with the receiver up
 * (the service also sends: the delivery rate is measured beside the publishes) and once
 * with it down (every line's first attempt fails and backs off for the rest of the run:
 * only the outbox's writes are left in the decision's cost).
 */
import autocannon from 'autocannon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EVENT_TYPES } from '../src/outbox/outbox-event.js';
import { ADMIN_TOKEN, ServiceProcess } from '../test/fault/service.js';
import { Receiver } from '../test/support/receiver.js';
import {
  dropTemplate,
  fencedPublish,
  prepareTemplate,
  runDatabase,
  runHttp,
  type Template,
  UNLIMITED,
} from './http.js';
import { addOutcome, graphqlOutcome, type Load, type Run } from './measure.js';

/** Scenario 10's row of webhooks that take batches (bench/report.ts finds it by this name). */
export const WEBHOOK_BATCHES_VARIANT = '3 webhooks of 50 events per request, receiver up';

/**
 * Adds `count` webhooks for every event type, all to `url`, each taking up to `batchSize`
 * events per request, to a prepared template.
 */
export async function addWebhooks(
  template: Template,
  count: number,
  url: string,
  batchSize = 1,
): Promise<void> {
  if (!count) return;
  const service = new ServiceProcess(template.file, { ...UNLIMITED });
  await service.start();
  try {
    for (let i = 0; i < count; i++)
      await service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }',
        { input: { url, events: EVENT_TYPES, batchSize } },
      );
  } finally {
    await service.stop();
  }
}

/**
 * One run of publishes with the template's webhooks. `receiverUp`: the receiver answers and
 * the run reports the deliveries it got per second beside the publishes, and which share of
 * the deliveries those publishes queued had arrived by the end of the load. Down: its port
 * refuses, and the back-off outlasts the run.
 */
export async function runWithWebhooks(
  options: Load & { template: Template; webhooks: number; receiver: Receiver | null },
): Promise<Run> {
  const before = options.receiver?.deliveries ?? 0;
  const run = await runHttp({
    ...options,
    requests: fencedPublish(0),
    env: options.receiver
      ? { PLANFENCE_WEBHOOK_POLL_MS: '100' }
      : {
          PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '3600000',
          PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '3600000',
        },
  });
  if (!options.receiver || !options.webhooks) return run;
  const received = options.receiver.deliveries - before;
  const queued = (run.outcomes.ok ?? 0) * 2 * options.webhooks;
  return {
    ...run,
    background: {
      unit: 'webhook deliveries',
      reqPerSec: received / options.seconds,
      ok: queued ? Math.min(1, received / queued) : 0,
    },
  };
}

/** A loopback URL nothing listens on: connection refused. */
export async function refusingUrl(): Promise<string> {
  const probe = new Receiver();
  await probe.start();
  const url = probe.url;
  await probe.stop();
  return url;
}

/** What one burst measured. */
export interface Burst {
  build: string;
  /** Publishes answered ok per second over the burst. */
  publishesPerSec: number;
  /** Deliveries those publishes queued, per second of the burst (2 events × the webhooks each). */
  queuedPerSec: number;
  /** Deliveries the receiver got per second over the burst. */
  deliveredPerSec: number;
  /** Deliveries still to send when the burst ended. */
  backlogAtEnd: number;
  /** Seconds from the end of the burst until the receiver had every queued delivery. */
  drainSeconds: number;
  /** Deliveries per second while draining (backlog / drain time). */
  drainPerSec: number;
}

/** A drain that sees no delivery arrive this long has stalled: the run fails. */
const DRAIN_STALL_MS = 60_000;

/**
 * One burst: a fresh copy of the template (its webhooks all point at `receiver`), one service
 * (`entry`: another build's main.js, else this one), `seconds` of fenced publishes from
 * `connections` clients; then the wait until every delivery they queued has arrived.
 */
export async function runBurst(options: {
  template: Template;
  webhooks: number;
  receiver: Receiver;
  seconds: number;
  connections: number;
  workDir: string;
  runId: string;
  entry: string | null;
}): Promise<Burst> {
  const database = await runDatabase(options.template, options.workDir, options.runId);
  const service = new ServiceProcess(database.location, {
    ...UNLIMITED,
    PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL',
    PLANFENCE_WEBHOOK_POLL_MS: '100',
    ...(options.entry ? { PLANFENCE_SERVICE_ENTRY: options.entry } : {}),
  });
  try {
    await service.start();
    const before = options.receiver.deliveries;
    const outcomes: Record<string, number> = {};
    const started = Date.now();
    await autocannon({
      url: service.url,
      connections: options.connections,
      duration: options.seconds,
      requests: fencedPublish(0)(options.template, options.runId).map((request) => ({
        ...request,
        onResponse: (status: number, body: string) =>
          addOutcome(outcomes, graphqlOutcome(status, body)),
      })),
    });
    const ended = Date.now();
    const burstSeconds = (ended - started) / 1000;
    const receivedInBurst = options.receiver.deliveries - before;
    const queued = (outcomes.ok ?? 0) * 2 * options.webhooks;
    let last = receivedInBurst;
    let moved = Date.now();
    while (options.receiver.deliveries - before < queued) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = options.receiver.deliveries - before;
      if (now !== last) [last, moved] = [now, Date.now()];
      if (Date.now() - moved > DRAIN_STALL_MS)
        throw new Error(`the drain stalled at ${now} of ${queued} deliveries`);
    }
    const drainSeconds = (Date.now() - ended) / 1000;
    const backlog = Math.max(0, queued - receivedInBurst);
    return {
      build: options.entry ?? 'this build',
      publishesPerSec: (outcomes.ok ?? 0) / burstSeconds,
      queuedPerSec: queued / burstSeconds,
      deliveredPerSec: receivedInBurst / burstSeconds,
      backlogAtEnd: backlog,
      drainSeconds,
      drainPerSec: drainSeconds > 0 ? backlog / drainSeconds : 0,
    };
  } finally {
    await service.stop();
    await database.remove();
  }
}

function option(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

/**
 * `npm run bench:webhooks [-- --seconds 30 --connections 8 --rounds 1 --batch-sizes 1,50 --baseline DIR]`:
 * 3 webhooks for every event type to one fast local receiver, a burst of fenced publishes
 * (each queues 2 events × 3 deliveries), then the drain; once per batch size (events per
 * request: 1 is a request per delivery, the body R23 describes; 50 the opt-in batches).
 * SQLite (synchronous NORMAL) by default; PostgreSQL on PLANFENCE_BENCH_POSTGRES_URL's
 * server. `--baseline DIR`: a copy of another build's dist/; each round then runs that
 * build and this one, one after the other (batch size 1 only: an older build may not know
 * batches).
 */
async function main(): Promise<void> {
  const seconds = Number(option('seconds') ?? 30);
  const connections = Number(option('connections') ?? 8);
  const rounds = Number(option('rounds') ?? 1);
  const baseline = option('baseline');
  const batchSizes = (option('batch-sizes') ?? (baseline ? '1' : '1,50')).split(',').map(Number);
  const postgres = process.env.PLANFENCE_BENCH_POSTGRES_URL;
  const webhooks = 3;
  const workDir = mkdtempSync(join(tmpdir(), 'planfence-bench-webhooks-'));
  const receiver = new Receiver();
  receiver.keep = false;
  await receiver.start();
  const log = (line: string) => process.stdout.write(`${line}\n`);
  log(
    `webhook burst: ${postgres ? 'PostgreSQL' : 'SQLite (synchronous NORMAL)'}, ${webhooks} webhooks, ` +
      `${seconds} s of publishes from ${connections} connections, ${rounds} round(s), ` +
      `batch sizes ${batchSizes.join(', ')}`,
  );
  const templates: Template[] = [];
  try {
    for (const batchSize of batchSizes) {
      const template = await prepareTemplate(workDir, `webhooks${batchSize}`, {
        count: 1,
        requireApproval: false,
        postgres,
      });
      templates.push(template);
      await addWebhooks(template, webhooks, receiver.url, batchSize);
    }
    const builds = baseline ? [join(baseline, 'src/main.js'), null] : [null];
    let run = 0;
    for (let round = 0; round < rounds; round++)
      for (const [i, batchSize] of batchSizes.entries())
        for (const entry of builds) {
          const result = await runBurst({
            template: templates[i],
            webhooks,
            receiver,
            seconds,
            connections,
            workDir,
            runId: `r${run++}`,
            entry,
          });
          log(
            [
              `${entry ? 'baseline' : 'this build'}, ${batchSize} event(s) per request:`,
              `${result.publishesPerSec.toFixed(0)} publishes/s,`,
              `${result.queuedPerSec.toFixed(0)} deliveries queued/s,`,
              `${result.deliveredPerSec.toFixed(0)} deliveries/s during the burst;`,
              `backlog ${result.backlogAtEnd} at its end, drained in ${result.drainSeconds.toFixed(1)} s`,
              `(${result.drainPerSec.toFixed(0)} deliveries/s)`,
            ].join(' '),
          );
        }
  } finally {
    for (const template of templates) await dropTemplate(template).catch(() => undefined);
    await receiver.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
