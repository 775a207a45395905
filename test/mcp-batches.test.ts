/**
 * JSON-RPC batches on POST /mcp are priced like GraphQL queries before any of their messages
 * runs (src/mcp/mcp.pricing.ts): a batch is refused as a whole over its length, with a call
 * that waits, or over the cost limit; an accepted batch runs in one of the few slots of
 * expensive requests. A VIEWER that sends many parallel batches of get_plan over the largest
 * plans keeps the service's memory within a budget and /health answering; a plan is sent
 * once in full (structuredContent), its text is a summary.
 */
import { startApp, type TestApp } from './support/app.js';
import { connectMcp } from './support/mcp.js';
import { World } from './support/world.js';
import { healthBaseline, healthProbe, judgeHealth } from './hostile/health.js';

const MAX_PLAN_BYTES = 1024 * 1024;
const MAX_MESSAGES = 64;
const MAX_COST = 70_000;
const HEAVY_SLOTS = 2;

let app: TestApp;
let world: World;
let viewer: string;
let agent: string;
let planId: string;

beforeAll(async () => {
  app = await startApp({
    PLANFENCE_MAX_PLAN_BYTES: String(MAX_PLAN_BYTES),
    PLANFENCE_MAX_ROOT_FIELDS: String(MAX_MESSAGES),
    PLANFENCE_MAX_QUERY_COST: String(MAX_COST),
    PLANFENCE_MAX_HEAVY_QUERIES: String(HEAVY_SLOTS),
    PLANFENCE_HEAVY_QUERY_WAIT_SECONDS: '2',
  });
  world = new World(app);
  viewer = await world.issue('viewer', 'VIEWER');
  agent = await world.issue('agent', 'AGENT');
  await world.createEnvironment('prod', 'MONOTONIC');
  const generation = await world.acquire(agent, 'prod', 3600);
  // A plan of the largest size.
  const content = `${'resource "x" "y" {}\n'.repeat(MAX_PLAN_BYTES / 20)}`.slice(0, MAX_PLAN_BYTES);
  planId = (await world.submitOk(agent, 'prod', generation, content)).id;
}, 60_000);

afterAll(async () => {
  await app.close();
});

/** POSTs `body` to /mcp as `token`; the status and the parsed answer. */
async function post(token: string, body: unknown): Promise<{ status: number; answer: any }> {
  const response = await fetch(`${app.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, answer: text ? JSON.parse(text) : null };
}

const call = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});
const getPlans = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => call(from + i, 'get_plan', { planId }));

async function plansOf(environment: string): Promise<number> {
  return (await world.auditEvents(environment)).filter(
    (e) => e.action === 'SUBMIT_PLAN' && e.outcome === 'ACCEPTED',
  ).length;
}

describe('a batch over a limit is refused as a whole, before any of its messages runs', () => {
  test('more messages than PLANFENCE_MAX_ROOT_FIELDS: BAD_USER_INPUT limit batch', async () => {
    const before = await plansOf('prod');
    const generation = await world.acquire(agent, 'prod', 3600);
    const { status, answer } = await post(agent, [
      call(0, 'submit_plan', { environment: 'prod', generation, content: 'in a batch' }),
      ...getPlans(MAX_MESSAGES, 1),
    ]);
    expect(status).toBe(400);
    expect(answer).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32600,
        message: expect.stringContaining('PLANFENCE_MAX_ROOT_FIELDS'),
        data: { code: 'BAD_USER_INPUT', limit: 'batch', max: MAX_MESSAGES },
      },
    });
    // The submit at the head of the batch never ran.
    expect(await plansOf('prod')).toBe(before);
  });

  test('over PLANFENCE_MAX_QUERY_COST (a plan read weighs its size bound): BAD_USER_INPUT limit cost', async () => {
    const before = await plansOf('prod');
    const generation = await world.acquire(agent, 'prod', 3600);
    // 1 + 1024 for the submit and 34 × 2049 for the reads: over 70,000.
    const { status, answer } = await post(agent, [
      call(0, 'submit_plan', { environment: 'prod', generation, content: 'in a batch' }),
      ...getPlans(34, 1),
    ]);
    expect(status).toBe(400);
    expect(answer.error.data).toEqual({ code: 'BAD_USER_INPUT', limit: 'cost', max: MAX_COST });
    expect(answer.error.message).toContain("the request's estimated cost is 70691");
    expect(await plansOf('prod')).toBe(before);
  });

  test('a call that waits is not batched: BAD_USER_INPUT limit waits', async () => {
    const { status, answer } = await post(viewer, [
      call(0, 'get_plan', { planId }),
      call(1, 'wait_for_decision', { planId, timeoutSeconds: 120 }),
    ]);
    expect(status).toBe(400);
    expect(answer.error.data).toEqual({ code: 'BAD_USER_INPUT', limit: 'waits', max: 0 });
    // Alone, it is answered.
    const alone = await post(viewer, call(2, 'wait_for_decision', { planId, timeoutSeconds: 1 }));
    expect(alone.status).toBe(200);
    expect(alone.answer.result.structuredContent).toEqual({
      plan: { id: planId, status: 'PROPOSED' },
      decided: false,
    });
  });
});

test('a batch within the limits is answered; each plan is sent once in full, its text is a summary', async () => {
  const { status, answer } = await post(viewer, getPlans(3));
  expect(status).toBe(200);
  expect(answer).toHaveLength(3);
  for (const message of answer) {
    const result = message.result;
    expect(result.structuredContent.plan).toMatchObject({ id: planId, contentTruncated: true });
    expect(result.structuredContent.plan.content).toHaveLength(64 * 1024);
    const text = result.content.map((c: { text: string }) => c.text).join('');
    expect(text.length).toBeLessThanOrEqual(4200);
    expect(text).toContain('all of it in structuredContent');
  }
  // The SDK's client reads the same results.
  const client = await connectMcp(app.url, viewer, 'http');
  try {
    const plan = await client.ok('get_plan', { planId });
    expect(plan.plan.content).toHaveLength(64 * 1024);
  } finally {
    await client.close();
  }
});

/** What 32 parallel batches may add to the process's resident memory (service and test client together). */
const RSS_BUDGET_BYTES = HEAVY_SLOTS * MAX_COST * 1024 + 64 * 1024 * 1024;

test('32 parallel batches of get_plan over the largest plans from a VIEWER: memory within its budget, /health answers', async () => {
  const baseline = await healthBaseline(app.url);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  }, 20);
  // The attack's steps: its batches answered (each runs its calls one at a time, in a slot).
  let answered = 0;
  const probe = healthProbe(app.url, 10, { progress: () => answered });
  const answers = await Promise.all(
    Array.from({ length: 32 }, async () => {
      const answer = await post(viewer, getPlans(32));
      answered++;
      return answer;
    }),
  );
  const probed = await probe.stop();
  const samples = probed.samples;
  clearInterval(sampler);
  rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  const rssGrowth = rssPeak - rssBefore;
  if (process.env.HOSTILE_VERBOSE)
    console.log({
      baseline,
      max: Math.max(...samples),
      n: samples.length,
      rssGrowth,
      statuses: answers.map((a) => a.status).join(','),
      samples: samples.map(Math.round).join(','),
    });

  // Each batch is answered in full, or refused as a whole while the slots are busy.
  for (const { status, answer } of answers) {
    if (status === 200) {
      expect(answer).toHaveLength(32);
      expect(answer.every((m: any) => m.result.structuredContent.plan.id === planId)).toBe(true);
    } else {
      expect(status).toBe(429);
      expect(answer.error.data).toMatchObject({ code: 'RATE_LIMITED' });
    }
  }
  expect(answers.some((a) => a.status === 200)).toBe(true);
  expect(rssGrowth).toBeLessThan(RSS_BUDGET_BYTES);
  // /health answered between two batches' answers: it waited 32.7 s (then 408) before
  // batches were priced. On demand, the worst answer against the idle baseline: up to 205×
  // was measured with the whole suite running beside it on two cores. One answer between
  // the batches' turns is the proof (work run start to end leaves none); more depend on load.
  const judged = judgeHealth(probed, baseline, { atLeast: 1, maxRatio: 400 });
  if (process.env.HOSTILE_VERBOSE) console.log(judged);
}, 120_000);

test('200 parallel batches of wait_for_decision: each refused at once, /health answers', async () => {
  const baseline = await healthBaseline(app.url);
  let answered = 0;
  const probe = healthProbe(app.url, 10, { progress: () => answered });
  const answers = await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const answer = await post(
        viewer,
        Array.from({ length: 32 }, (_, j) =>
          call(i * 100 + j, 'wait_for_decision', { planId, timeoutSeconds: 120 }),
        ),
      );
      answered++;
      return answer;
    }),
  );
  const probed = await probe.stop();
  for (const { status, answer } of answers) {
    expect(status).toBe(400);
    expect(answer.error.data).toEqual({ code: 'BAD_USER_INPUT', limit: 'waits', max: 0 });
  }
  // Unpriced, these waits would hold the service for seconds; refused at once, /health is
  // answered between them. On demand, the worst answer against the idle baseline: with the
  // whole suite running beside it on two cores, up to 319× (a collection pause, the
  // scheduler), so the bound is 1,000×: about a second, far below a stall.
  const judged = judgeHealth(probed, baseline, { atLeast: 1, maxRatio: 1000 });
  if (process.env.HOSTILE_VERBOSE) console.log(judged);
}, 60_000);
