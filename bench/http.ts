/**
 * The scenarios that go through the service over HTTP: a copy of a prepared database
 * (a SQLite file, or a PostgreSQL database created from a template database), the built
 * service on it as a child process (or several sharing it), autocannon on loopback.
 */
import autocannon from 'autocannon';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  ADMIN_TOKEN,
  createPostgresDatabase,
  dropPostgresDatabase,
  seededRandom,
  ServiceProcess,
} from '../test/fault/service.js';
import { LatencyProxy } from '../test/support/latency-proxy.js';
import {
  addOutcome,
  cpuMs,
  cpuUsageMs,
  mainThreadCpuMs,
  writtenBytes,
  graphqlOutcome,
  type Load,
  peakRssMb,
  postgresCpu,
  postgresCpuPerRequest,
  type Run,
} from './measure.js';

const TYPENAME = '{ __typename }';
const WHOAMI = '{ whoami { name role } }';
const CURRENT_PLAN =
  'query($environment: String!) { currentPlan(environment: $environment) { id status } }';
const SUBMIT = 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status } }';
const APPROVE = 'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { id status } }';

/** A plan of a realistic size for an agent's change (about 300 bytes). */
const CONTENT = JSON.stringify({
  service: 'checkout',
  image: 'registry.example/checkout:2026.11.29-1f3c9a7',
  replicas: 6,
  steps: ['drain canary', 'roll 2 of 6', 'verify error budget', 'roll 4 of 6', 'roll 6 of 6'],
  rollback: 'registry.example/checkout:2026.11.28-8e21b04',
});

/**
 * The per-principal rate limits raised out of the way of the load (the token buckets still
 * run on every request; docs/limits.md): the bench measures throughput, not the limits.
 */
export const UNLIMITED: Record<string, string> = {
  PLANFENCE_RATE_REQUESTS_PER_SECOND: '1000000',
  PLANFENCE_RATE_REQUESTS_BURST: '10000000',
  PLANFENCE_RATE_WRITES_PER_SECOND: '1000000',
  PLANFENCE_RATE_WRITES_BURST: '10000000',
  PLANFENCE_RATE_LEASES_PER_MINUTE: '1000000',
};

/** A database prepared through the API once, copied for every run. */
export interface Template {
  /** A SQLite file, or the URL of a PostgreSQL template database (copied with CREATE DATABASE … TEMPLATE). */
  file: string;
  /** The PostgreSQL server the template lives on; undefined on SQLite. */
  postgres?: string;
  agentToken: string;
  /** Distinct reviewers, as many as the environments' approval rule needs (at least one). */
  reviewerTokens: string[];
  environments: string[];
  /** The generation the agent holds (at the fence). */
  fresh: number;
  /** An older generation of the same agent, below the fence. */
  stale: number;
}

const SQLITE_FILES = ['', '-wal', '-shm'];

/** Copies a SQLite database with its WAL files, replacing what `to` held. */
export function copyDatabase(from: string, to: string): void {
  for (const suffix of SQLITE_FILES) {
    rmSync(to + suffix, { force: true });
    if (existsSync(from + suffix)) copyFileSync(from + suffix, to + suffix);
  }
}

export function removeDatabase(file: string): void {
  for (const suffix of SQLITE_FILES) rmSync(file + suffix, { force: true });
}

/**
 * Prepares a database through the service's own API: an agent and a reviewer, `count`
 * environments in which the agent holds two generations and has written with the newer
 * one (so the older is below the fence). `seed` runs on the stopped database in between,
 * after the environments exist and before the leases, to store history directly.
 */
export async function prepareTemplate(
  dir: string,
  name: string,
  options: {
    count: number;
    requireApproval: boolean;
    /** Approvals the environments' one rule needs (default 1, the default policy). */
    approvals?: number;
    seed?: (file: string) => void;
    /** A PostgreSQL server URL: the template is a database there instead of a SQLite file. */
    postgres?: string;
    /** Plan policies every environment gets (updateEnvironmentPolicy). */
    planPolicies?: { name: string; expression: string; effect: string; message: string }[];
  },
): Promise<Template> {
  mkdirSync(dir, { recursive: true });
  let file = join(dir, `${name}.db`);
  if (options.postgres) {
    file = (await createPostgresDatabase(options.postgres, `planfence_bench_${name}`)).url;
  } else {
    removeDatabase(file);
  }
  let service = new ServiceProcess(file, { ...UNLIMITED, PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL' });
  try {
    await service.start();
    const agentToken = await service.issueToken('bench-agent', 'AGENT');
    const reviewerTokens: string[] = [];
    for (let i = 0; i < (options.approvals ?? 1); i++)
      reviewerTokens.push(await service.issueToken(`bench-reviewer-${i}`, 'REVIEWER'));
    const environments = Array.from({ length: options.count }, (_, i) => `${name}-${i}`);
    await inParallel(environments, 8, (environment) =>
      service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        {
          input: {
            name: environment,
            requireApproval: options.requireApproval,
            ...(options.approvals ? { approvalRules: [{ count: options.approvals }] } : {}),
          },
        },
      ),
    );
    if (options.planPolicies)
      await inParallel(environments, 8, (environment) =>
        service.ok(
          ADMIN_TOKEN,
          'mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { name } }',
          { input: { environment, planPolicies: options.planPolicies } },
        ),
      );
    if (options.seed) {
      await service.stop();
      options.seed(file);
      service = new ServiceProcess(file, { ...UNLIMITED, PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL' });
      await service.start();
    }
    const generations: number[] = [];
    await inParallel(environments, 8, async (environment) => {
      for (let grant = 0; grant < 2; grant++) {
        const data = await service.ok<{ acquireLease: { generation: number } }>(
          agentToken,
          'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }',
          { input: { environment, ttlSeconds: 3600, instance: 'bench' } },
        );
        generations.push(data.acquireLease.generation);
      }
    });
    const fresh = Math.max(...generations);
    // Every environment got the same two generations (all start from the same history).
    await inParallel(environments, 8, async (environment) => {
      const data = await service.ok<{ submitPlan: { id: string } }>(agentToken, SUBMIT, {
        input: {
          environment,
          generation: fresh,
          idempotencyKey: `template-${environment}`,
          content: CONTENT,
        },
      });
      if (options.requireApproval) {
        for (const reviewerToken of reviewerTokens)
          await service.ok(reviewerToken, APPROVE, { input: { planId: data.submitPlan.id } });
      }
    });
    return {
      file,
      postgres: options.postgres,
      agentToken,
      reviewerTokens,
      environments,
      fresh,
      stale: fresh - 1,
    };
  } finally {
    await service.stop();
  }
}

async function inParallel<T>(items: T[], width: number, work: (item: T) => Promise<unknown>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

type Requests = (template: Template, runId: string) => autocannon.Request[];

function graphqlRequest(
  token: string | null,
  body: (context: Record<string, unknown>) => string | null,
  onResponse?: (body: string, context: Record<string, unknown>) => void,
): autocannon.Request {
  return {
    method: 'POST',
    path: '/graphql',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    setupRequest: (request, context) => {
      const text = body(context as Record<string, unknown>);
      return text == null ? (null as unknown as autocannon.Request) : { ...request, body: text };
    },
    onResponse: onResponse
      ? (_status, responseBody, context) =>
          onResponse(responseBody, context as Record<string, unknown>)
      : undefined,
  };
}

function submitBody(environment: string, generation: number, key: string): string {
  return JSON.stringify({
    query: SUBMIT,
    variables: { input: { environment, generation, idempotencyKey: key, content: CONTENT } },
  });
}

/** Scenario 0: the cheapest GraphQL request, no token: HTTP + GraphQL and nothing of ours. */
export const typename: Requests = () => [
  graphqlRequest(null, () => JSON.stringify({ query: TYPENAME })),
];

/** Scenario 1: an authenticated no-op query on the same stack. */
export const whoami: Requests = (template) => [
  graphqlRequest(template.agentToken, () => JSON.stringify({ query: WHOAMI })),
];

/** Scenario 8: the published plan of the environment that scenario 2 publishes to. */
export const currentPlan: Requests = (template) => [
  graphqlRequest(template.reviewerTokens[0], () =>
    JSON.stringify({ query: CURRENT_PLAN, variables: { environment: template.environments[0] } }),
  ),
];

/** Scenario 2 (and 5): submits with fresh keys where no approval is needed; `staleShare` of them below the fence. */
export function fencedPublish(staleShare: 0 | 0.5): Requests {
  return (template, runId) => {
    let n = 0;
    return [
      graphqlRequest(template.agentToken, () => {
        n++;
        const stale = staleShare > 0 && n % 2 === 0;
        return submitBody(
          template.environments[0],
          stale ? template.stale : template.fresh,
          `${runId}-${n}`,
        );
      }),
    ];
  };
}

/**
 * Scenario 3: an agent submits, then every reviewer the rule needs approves that plan (the
 * last approval publishes it); one environment per pipeline at a time.
 */
export const approvalPath: Requests = (template, runId) => {
  let n = 0;
  return [
    graphqlRequest(
      template.agentToken,
      (context) => {
        n++;
        context.environment = template.environments[n % template.environments.length];
        return submitBody(context.environment as string, template.fresh, `${runId}-${n}`);
      },
      (body, context) => {
        const parsed = JSON.parse(body) as { data?: { submitPlan?: { id: string } } | null };
        context.planId = parsed.data?.submitPlan?.id;
      },
    ),
    ...template.reviewerTokens.map((reviewerToken) =>
      graphqlRequest(reviewerToken, (context) =>
        context.planId
          ? JSON.stringify({ query: APPROVE, variables: { input: { planId: context.planId } } })
          : null,
      ),
    ),
  ];
};

/** Scenario 4: submits spread at random over many environments. */
export const manyEnvironments: Requests = (template, runId) => {
  const random = seededRandom(4);
  let n = 0;
  return [
    graphqlRequest(template.agentToken, () => {
      n++;
      const environment = template.environments[random(template.environments.length)];
      return submitBody(environment, template.fresh, `${runId}-${n}`);
    }),
  ];
};

/** A database of one run: a copy of the template, and how to remove it. */
export async function runDatabase(
  template: Template,
  workDir: string,
  runId: string,
): Promise<{ location: string; remove: () => Promise<void> }> {
  if (template.postgres) {
    const { default: pg } = await import('pg');
    const copy = await createPostgresDatabase(template.postgres, 'planfence_bench_run');
    const name = new URL(copy.url).pathname.slice(1);
    const client = new pg.Client({ connectionString: template.postgres });
    await client.connect();
    try {
      // createPostgresDatabase made an empty one; replace it by a copy of the template.
      await client.query(`DROP DATABASE ${name}`);
      await client.query(
        `CREATE DATABASE ${name} TEMPLATE ${new URL(template.file).pathname.slice(1)}`,
      );
    } finally {
      await client.end();
    }
    return { location: copy.url, remove: () => dropPostgresDatabase(template.postgres!, name) };
  }
  const file = join(workDir, `run-${runId}.db`);
  copyDatabase(template.file, file);
  return { location: file, remove: () => Promise.resolve(removeDatabase(file)) };
}

/** Load that runs beside the measured one, against the first instance; only its rate is reported. */
export interface Background {
  requests: Requests;
  connections: number;
  /** What one of its requests is, for the report ("publishes"). */
  unit: string;
}

/**
 * One run: a fresh copy of the template, `instances` services on it, `seconds` of load
 * from `connections` clients split evenly across the instances (and `background` load
 * beside it). Latency percentiles are the worst instance's.
 */
export async function runHttp(
  options: Load & {
    template: Template;
    requests: Requests;
    instances?: number;
    background?: Background;
    /** Added to each service's environment. */
    env?: Record<string, string>;
    /**
     * PostgreSQL: the services reach the database through a LatencyProxy that holds each
     * chunk this long each way, and the run reports round trips per request.
     */
    latencyMs?: number;
  },
): Promise<Run> {
  const database = await runDatabase(options.template, options.workDir, options.runId);
  let location = database.location;
  let proxy: LatencyProxy | null = null;
  if (options.latencyMs != null && options.template.postgres) {
    const url = new URL(database.location);
    proxy = new LatencyProxy(
      { host: url.hostname, port: Number(url.port || 5432) },
      options.latencyMs,
    );
    url.host = `127.0.0.1:${await proxy.start()}`;
    location = url.toString();
  }
  const services = Array.from(
    { length: options.instances ?? 1 },
    () =>
      new ServiceProcess(location, {
        ...UNLIMITED,
        PLANFENCE_SQLITE_SYNCHRONOUS: options.durability,
        ...options.env,
      }),
  );
  try {
    for (const service of services) await service.start();
    // What the services send on their own (sweeps, outbox polls), per second, before the load.
    let idleTurnsPerSecond = 0;
    if (proxy) {
      proxy.reset();
      await new Promise((resolve) => setTimeout(resolve, 2000));
      idleTurnsPerSecond = proxy.turns / 2;
      proxy.reset();
    }
    const outcomes: Record<string, number> = {};
    const load = (
      url: string,
      connections: number,
      requests: autocannon.Request[],
      count: Record<string, number>,
      duration: number,
    ) =>
      autocannon({
        url,
        connections,
        duration,
        requests: requests.map((request) => {
          const next = typeof request.onResponse === 'function' ? request.onResponse : undefined;
          return {
            ...request,
            onResponse: (status, body, context, headers) => {
              addOutcome(count, graphqlOutcome(status, body));
              next?.(status, body, context, headers);
            },
          };
        }),
      });
    /**
     * The run's load on every instance (and the background load beside it), for `duration`
     * seconds; `tag` keeps each pass's idempotency keys its own.
     */
    const perInstance = Math.max(1, Math.round(options.connections / services.length));
    const loads = (
      tag: string,
      count: Record<string, number>,
      backgroundCount: Record<string, number>,
      duration: number,
    ) =>
      Promise.all([
        options.background
          ? load(
              services[0].url,
              options.background.connections,
              options.background.requests(options.template, `${options.runId}-bg${tag}`),
              backgroundCount,
              duration,
            )
          : Promise.resolve(null),
        ...services.map((service, i) =>
          load(
            service.url,
            perInstance,
            options.requests(options.template, `${options.runId}${tag}-${i}`),
            count,
            duration,
          ),
        ),
      ]);
    // The warm-up: the same load, nothing of it measured.
    if (options.warmupSeconds > 0) {
      await loads('-warm', {}, {}, options.warmupSeconds);
      proxy?.reset();
    }
    const backgroundOutcomes: Record<string, number> = {};
    const commitsBefore = await commitCounters(services.map((service) => service.url));
    const cpuBefore = services.reduce((sum, service) => sum + cpuMs(service.pid!), 0);
    const threadsBefore = services.map((service) => mainThreadCpuMs(service.pid!));
    const writtenBefore = services.map((service) => writtenBytes(service.pid!));
    const postgresBefore = options.template.postgres ? postgresCpu() : null;
    const benchCpu = process.cpuUsage();
    const startedAt = performance.now();
    const [background, ...results] = await loads('', outcomes, backgroundOutcomes, options.seconds);
    const wallMs = performance.now() - startedAt;
    const loadMs = cpuUsageMs(process.cpuUsage(benchCpu));
    const cpu = services.reduce((sum, service) => sum + cpuMs(service.pid!), 0) - cpuBefore;
    const busy = services
      .map((service, i) => (mainThreadCpuMs(service.pid!) - threadsBefore[i]) / wallMs)
      .filter((share) => Number.isFinite(share));
    const written = services
      .map((service, i) => writtenBytes(service.pid!) - writtenBefore[i])
      .filter((bytes) => Number.isFinite(bytes));
    const postgresAfter = postgresBefore ? postgresCpu() : null;
    const commitsAfter = await commitCounters(services.map((service) => service.url));
    const commits = commitsAfter.transactions - commitsBefore.transactions;
    const writes = commitsAfter.writes - commitsBefore.writes;
    const answered =
      results.reduce((sum, r) => sum + r.requests.total, 0) + (background?.requests.total ?? 0);
    const errors = results.reduce((sum, r) => sum + r.errors, 0);
    const timeouts = results.reduce((sum, r) => sum + r.timeouts, 0);
    const rss = services
      .map((service) => (service.pid ? peakRssMb(service.pid) : null))
      .filter((v): v is number => v != null);
    const roundTripsPerRequest =
      proxy && answered
        ? Math.max(0, proxy.turns - idleTurnsPerSecond * options.seconds) / answered
        : null;
    return {
      ...(proxy ? { roundTripsPerRequest, heldMs: proxy.heldMs() } : {}),
      reqPerSec: results.reduce((sum, r) => sum + r.requests.total / r.duration, 0),
      p50Ms: Math.max(...results.map((r) => r.latency.p50)),
      p99Ms: Math.max(...results.map((r) => r.latency.p99)),
      peakRssMb: rss.length ? Math.max(...rss) : null,
      writesPerCommit: commits < 10 ? null : writes / commits,
      writtenKiBPerRequest:
        options.template.postgres || !written.length || !answered
          ? null
          : written.reduce((sum, bytes) => sum + bytes, 0) / 1024 / answered,
      writeQueueDepth: options.template.postgres
        ? null
        : (commitsAfter.queuedSeconds - commitsBefore.queuedSeconds) / (wallMs / 1000),
      cpuMsPerRequest: Number.isFinite(cpu) && answered ? cpu / answered : null,
      loadCpuMsPerRequest: answered ? loadMs / answered : null,
      requestThreadBusy: busy.length ? Math.max(...busy) : null,
      postgresCpuMsPerRequest:
        postgresBefore && postgresAfter
          ? postgresCpuPerRequest(postgresBefore, postgresAfter, answered)
          : null,
      outcomes: {
        ...outcomes,
        ...(errors ? { CONNECTION_ERROR: errors } : {}),
        ...(timeouts ? { TIMEOUT: timeouts } : {}),
      },
      ...(background && options.background
        ? {
            background: {
              unit: options.background.unit,
              reqPerSec: background.requests.total / background.duration,
              ok: (backgroundOutcomes.ok ?? 0) / Math.max(1, background.requests.total),
            },
          }
        : {}),
    };
  } finally {
    for (const service of services) await service.stop();
    await proxy?.stop();
    await database.remove();
  }
}

/** The services' commit counters (planfence_commits_total, planfence_committed_writes_total), summed. */
export async function commitCounters(
  urls: string[],
): Promise<{ transactions: number; writes: number; queuedSeconds: number }> {
  const sum = { transactions: 0, writes: 0, queuedSeconds: 0 };
  for (const url of urls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const value = (name: string) =>
      Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    sum.transactions += value('planfence_commits_total');
    sum.writes += value('planfence_committed_writes_total');
    sum.queuedSeconds += value('planfence_write_queue_seconds_total');
  }
  return sum;
}

/** Removes a template: its SQLite files, or its PostgreSQL database. */
export async function dropTemplate(template: Template): Promise<void> {
  if (!template.postgres) return removeDatabase(template.file);
  await dropPostgresDatabase(template.postgres, new URL(template.file).pathname.slice(1));
}
