/**
 * Which statements one decision sends to PostgreSQL, grouped by round trip: the service
 * runs on a fresh database through a counting proxy, and one warm publish (or `--approve`:
 * a submit then its approval) is traced.
 *
 *   npm run bench:statements                 # needs PLANFENCE_BENCH_POSTGRES_URL or PLANFENCE_TEST_POSTGRES_URL
 *   npm run bench:statements -- --approve
 *   npm run bench:statements -- --page       # a page of 100 plans, as a dashboard reads it
 *
 * `--page` traces `plans(first: 100)` with each plan's approvals and pending rules, then
 * times it with the proxy holding each chunk `--latency` ms each way (default 0.5): the
 * median of 21 reads, ms.
 */
import {
  ADMIN_TOKEN,
  createPostgresDatabase,
  ServiceProcess,
  textOption,
} from '../test/fault/service.js';
import { frontendStatements, LatencyProxy } from '../test/support/latency-proxy.js';

const server = process.env.PLANFENCE_BENCH_POSTGRES_URL ?? process.env.PLANFENCE_TEST_POSTGRES_URL;
if (!server) {
  console.error('set PLANFENCE_BENCH_POSTGRES_URL (or PLANFENCE_TEST_POSTGRES_URL)');
  process.exit(2);
}
const approve = process.argv.includes('--approve');
const page = process.argv.includes('--page');
const latencyMs = Number(textOption(process.argv.slice(2), 'latency') ?? 0.5);

const database = await createPostgresDatabase(server, 'planfence_bench_statements');
const target = new URL(database.url);
let trace: { turn: number; sql: string }[] | null = null;
const proxy = new LatencyProxy(
  { host: target.hostname, port: Number(target.port || 5432) },
  0,
  (chunk, turn) => {
    if (trace) for (const sql of frontendStatements(chunk)) trace.push({ turn, sql });
  },
);
const through = new URL(database.url);
through.host = `127.0.0.1:${await proxy.start()}`;
// No webhooks here: the dispatcher's poll (an outbox check and a claim) stays out of the trace.
const service = new ServiceProcess(through.toString(), { PLANFENCE_WEBHOOK_POLL_MS: '3600000' });
try {
  await service.start();
  const agent = await service.issueToken('agent', 'AGENT');
  const reviewer = await service.issueToken('reviewer', 'REVIEWER');
  await service.ok(
    ADMIN_TOKEN,
    `mutation { createEnvironment(input: { name: "prod", requireApproval: ${approve} }) { name } }`,
  );
  const generation = (
    await service.ok<{ acquireLease: { generation: number } }>(
      agent,
      'mutation { acquireLease(input: { environment: "prod", ttlSeconds: 3600 }) { generation } }',
    )
  ).acquireLease.generation;
  const submit = (content: string) =>
    service.ok<{ submitPlan: { id: string } }>(
      agent,
      'mutation($g: Int!, $c: String!, $k: String!) { submitPlan(input: { environment: "prod", generation: $g, content: $c, idempotencyKey: $k }) { id } }',
      { g: generation, c: content, k: `key-${content}` },
    );
  // Warm: the token is cached, the pool connected, the statements prepared.
  const warm = await submit('warm');
  if (approve)
    await service.ok(
      reviewer,
      'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
      {
        id: warm.submitPlan.id,
      },
    );
  await new Promise((resolve) => setTimeout(resolve, 500));
  const traced = async (what: string, run: () => Promise<unknown>) => {
    // What the decision before wakes (the dispatcher looks at the outbox after each commit) first.
    await new Promise((resolve) => setTimeout(resolve, 300));
    trace = [];
    const from = proxy.turns;
    await run();
    const seen = trace;
    trace = null;
    // What the service sends on its own meanwhile (the lease queue's sweeper) is in the list too.
    console.log(`\n${what}: ${proxy.turns - from} round trips, ${seen.length} statements`);
    for (const { turn, sql } of seen)
      console.log(
        `  ${String(turn - from).padStart(3)}  ${sql.replace(/\s+/g, ' ').slice(0, 150)}`,
      );
  };
  if (page) {
    await readPage();
  } else {
    await decisions();
  }

  /** A page of 100 plans of an environment that wants two approvals, a third of them given one. */
  async function readPage() {
    await service.ok(
      ADMIN_TOKEN,
      'mutation { createEnvironment(input: { name: "page", approvalRules: [{ count: 2 }] }) { name } }',
    );
    const g = (
      await service.ok<{ acquireLease: { generation: number } }>(
        agent,
        'mutation { acquireLease(input: { environment: "page", ttlSeconds: 3600 }) { generation } }',
      )
    ).acquireLease.generation;
    for (let i = 0; i < 100; i++) {
      const { submitPlan } = await service.ok<{ submitPlan: { id: string } }>(
        agent,
        'mutation($g: Int!, $c: String!, $k: String!) { submitPlan(input: { environment: "page", generation: $g, content: $c, idempotencyKey: $k }) { id } }',
        { g, c: `plan ${i}`, k: `page-${i}` },
      );
      if (i % 3 === 0)
        await service.ok(
          reviewer,
          'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
          {
            id: submitPlan.id,
          },
        );
    }
    const read = () =>
      service.ok<{ plans: unknown[] }>(
        ADMIN_TOKEN,
        '{ plans(environment: "page", first: 100) { id status approvals { approver } pendingApprovalRules { group count } } }',
      );
    await read();
    await traced('a page of 100 plans with their approvals and pending rules', read);
    proxy.delayMs = latencyMs;
    const times: number[] = [];
    for (let i = 0; i < 21; i++) {
      const started = performance.now();
      const { plans } = await read();
      times.push(performance.now() - started);
      if (plans.length !== 100) throw new Error(`the page has ${plans.length} plans`);
    }
    proxy.delayMs = 0;
    times.sort((a, b) => a - b);
    console.log(
      `\nthe same page through ${latencyMs} ms each way: median ${times[10].toFixed(1)} ms of 21 reads (min ${times[0].toFixed(1)}, max ${times[20].toFixed(1)})`,
    );
  }

  async function decisions() {
    let planId = '';
    await traced('a publish' + (approve ? ' (submit, PROPOSED)' : ''), async () => {
      planId = (await submit('traced')).submitPlan.id;
    });
    if (approve)
      await traced('its approval', () =>
        service.ok(reviewer, 'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }', {
          id: planId,
        }),
      );
  }
} finally {
  await service.stop();
  await proxy.stop();
  await database.drop();
}
