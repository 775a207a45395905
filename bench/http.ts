/**
 * The scenarios that go through the service over HTTP: a copy of a prepared database,
 * the built service on it as a child process, autocannon on loopback against it.
 */
import autocannon from 'autocannon';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_TOKEN, seededRandom, ServiceProcess } from '../test/fault/service.js';
import { addOutcome, graphqlOutcome, type Load, peakRssMb, type Run } from './measure.js';

const WHOAMI = '{ whoami { name role } }';
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

/** A database prepared through the API once, copied for every run. */
export interface Template {
  file: string;
  agentToken: string;
  reviewerToken: string;
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
  options: { count: number; requireApproval: boolean; seed?: (file: string) => void },
): Promise<Template> {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.db`);
  removeDatabase(file);
  let service = new ServiceProcess(file, { PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL' });
  try {
    await service.start();
    const agentToken = await service.issueToken('bench-agent', 'AGENT');
    const reviewerToken = await service.issueToken('bench-reviewer', 'REVIEWER');
    const environments = Array.from({ length: options.count }, (_, i) => `${name}-${i}`);
    await inParallel(environments, 8, (environment) =>
      service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        { input: { name: environment, requireApproval: options.requireApproval } },
      ),
    );
    if (options.seed) {
      await service.stop();
      options.seed(file);
      service = new ServiceProcess(file, { PLANFENCE_SQLITE_SYNCHRONOUS: 'NORMAL' });
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
        await service.ok(reviewerToken, APPROVE, { input: { planId: data.submitPlan.id } });
      }
    });
    return { file, agentToken, reviewerToken, environments, fresh, stale: fresh - 1 };
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
  token: string,
  body: (context: Record<string, unknown>) => string | null,
  onResponse?: (body: string, context: Record<string, unknown>) => void,
): autocannon.Request {
  return {
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
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

/** Scenario 1: an authenticated no-op query on the same stack. */
export const whoami: Requests = (template) => [
  graphqlRequest(template.agentToken, () => JSON.stringify({ query: WHOAMI })),
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

/** Scenario 3: an agent submits, a reviewer approves that plan; one environment per pipeline at a time. */
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
    graphqlRequest(template.reviewerToken, (context) =>
      context.planId
        ? JSON.stringify({ query: APPROVE, variables: { input: { planId: context.planId } } })
        : null,
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

/** One run: a fresh copy of the template, the service on it, `seconds` of load from `connections` clients. */
export async function runHttp(
  options: Load & { template: Template; requests: Requests },
): Promise<Run> {
  const file = join(options.workDir, `run-${options.runId}.db`);
  copyDatabase(options.template.file, file);
  const service = new ServiceProcess(file, { PLANFENCE_SQLITE_SYNCHRONOUS: options.durability });
  await service.start();
  try {
    const outcomes: Record<string, number> = {};
    const requests = options.requests(options.template, options.runId);
    const result = await autocannon({
      url: service.url,
      connections: options.connections,
      duration: options.seconds,
      requests: requests.map((request) => {
        const next = typeof request.onResponse === 'function' ? request.onResponse : undefined;
        return {
          ...request,
          onResponse: (status, body, context, headers) => {
            addOutcome(outcomes, graphqlOutcome(status, body));
            next?.(status, body, context, headers);
          },
        };
      }),
    });
    return {
      reqPerSec: result.requests.total / result.duration,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      peakRssMb: service.pid ? peakRssMb(service.pid) : null,
      outcomes: {
        ...outcomes,
        ...(result.errors ? { CONNECTION_ERROR: result.errors } : {}),
        ...(result.timeouts ? { TIMEOUT: result.timeouts } : {}),
      },
    };
  } finally {
    await service.stop();
    removeDatabase(file);
  }
}
