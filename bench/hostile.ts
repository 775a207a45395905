/**
 * What hostile GraphQL documents cost the service, next to a normal authenticated request,
 * in one run: `npm run bench:hostile [-- --runs 3 --out docs/BENCHMARKS.md]`.
 *
 * The built service runs as a child process on a fresh SQLite file with the default
 * limits, a second with PLANFENCE_MAX_QUERY_BYTES raised to 4 MiB (the token cap refuses
 * the big documents) and a third with the token cap raised too (the root-field cap does). Each row sends its document
 * sequentially `n` times; the service's CPU time (user + system, from /proc) over those
 * requests divided by `n` is the CPU per request, and the client's wall time per request
 * is the latency. Rows are interleaved across `--runs` rounds; the table shows medians.
 * The section "Hostile requests" of the output file is replaced, the rest kept.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { ADMIN_TOKEN, option, ServiceProcess, textOption } from '../test/fault/service.js';
import { maskingHeavyDocument } from '../test/hostile/terraform-documents.js';

const argv = process.argv.slice(2);
const runs = option(argv, 'runs', 3);
const out = textOption(argv, 'out') ?? 'docs/BENCHMARKS.md';
const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

function log(line: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

/** User + system CPU of a process so far, in milliseconds. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "(comm) ": state is field 3 of the man page, utime 14 and stime 15.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function aliases(n: number, field: string): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`a${i}: ${field}`);
  return `{ ${parts.join(' ')} }`;
}

interface Case {
  name: string;
  /** Which service: default limits, or the document cap raised. */
  service: 'default' | 'roomy' | 'wide';
  token: 'viewer' | null;
  body: string;
  /** Requests per round. */
  n: number;
  /** Where it is sent (default /graphql). */
  path?: '/mcp';
}

interface Measured {
  cpuMsPerRequest: number[];
  latencyMs: number[];
  outcomes: Set<string>;
  bytes: number;
}

async function send(
  service: ServiceProcess,
  token: string | null,
  body: string,
  path = '/graphql',
): Promise<{ outcome: string; ms: number }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (path === '/mcp') headers.accept = 'application/json, text/event-stream';
  const started = performance.now();
  const response = await fetch(`${service.url}${path}`, { method: 'POST', headers, body });
  const text = await response.text();
  const ms = performance.now() - started;
  let outcome = `HTTP ${response.status}`;
  try {
    const parsed = JSON.parse(text) as {
      errors?: { extensions?: { code?: string; limit?: string } }[];
      error?: { data?: { code?: string; limit?: string } };
    };
    // A JSON-RPC refusal of the whole request (POST /mcp) carries the code in error.data.
    const error = parsed.errors?.[0]?.extensions ?? parsed.error?.data;
    outcome = error
      ? `${response.status} ${error.code}${error.limit ? ` (${error.limit})` : ''}`
      : `${response.status} OK`;
  } catch {
    // not JSON: keep the status
  }
  return { outcome, ms };
}

/** p99 of `values`. */
function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
}

/** /health round trips, one at a time, until `stop`. */
function probeHealth(service: ServiceProcess): { stop(): Promise<number[]> } {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await (await fetch(`${service.url}/health`)).arrayBuffer();
      samples.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

/** An admitted graphql-transport-ws socket that counts what it receives. */
async function admittedSocket(service: ServiceProcess, token: string) {
  const ws = new WebSocket(`${service.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  const seen = {
    next: 0,
    error: 0,
    /** Subscriptions that had their first answer (an event or an error). */
    answered: new Set<string>(),
    codes: new Map<string, number>(),
    closed: null as number | null,
  };
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const closed = new Promise<number>((resolve) =>
    ws.on('close', (code) => resolve((seen.closed = code))),
  );
  const acked = new Promise<void>((resolve) =>
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as {
        type: string;
        id?: string;
        payload?: { extensions?: { code?: string } }[];
      };
      if ((frame.type === 'next' || frame.type === 'error') && frame.id)
        seen.answered.add(frame.id);
      if (frame.type === 'connection_ack') resolve();
      if (frame.type === 'next') seen.next++;
      if (frame.type === 'error') {
        seen.error++;
        const code = frame.payload?.[0]?.extensions?.code ?? 'none';
        seen.codes.set(code, (seen.codes.get(code) ?? 0) + 1);
      }
    }),
  );
  ws.send(
    JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }),
  );
  await acked;
  const subscribe = (id: string, query: string, variables: Record<string, unknown>) =>
    ws.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables } }));
  return { ws, seen, closed, subscribe };
}

/** Waits until `done` holds (checked every 20 ms), at most `seconds`. */
async function until(done: () => boolean, seconds: number): Promise<void> {
  const deadline = performance.now() + seconds * 1000;
  while (!done() && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Attack {
  name: string;
  /** Runs the attack to its end; says what the service answered. */
  run(service: ServiceProcess): Promise<string>;
}

async function main(): Promise<void> {
  const workDir = mkdtempSync(join(os.tmpdir(), 'planfence-hostile-'));
  const services = {
    default: new ServiceProcess(join(workDir, 'default.db'), { LOG_LEVEL: 'warn' }),
    roomy: new ServiceProcess(join(workDir, 'roomy.db'), {
      LOG_LEVEL: 'warn',
      PLANFENCE_MAX_QUERY_BYTES: String(4 * 1024 * 1024),
    }),
    wide: new ServiceProcess(join(workDir, 'wide.db'), {
      LOG_LEVEL: 'warn',
      PLANFENCE_MAX_QUERY_BYTES: String(4 * 1024 * 1024),
      PLANFENCE_MAX_QUERY_TOKENS: String(10_000_000),
    }),
  };
  try {
    await services.default.start();
    await services.roomy.start();
    await services.wide.start();
    const viewer: Record<string, string> = {};
    for (const [name, service] of Object.entries(services)) {
      viewer[name] = await service.issueToken('bench-viewer', 'VIEWER');
      await service.ok(
        ADMIN_TOKEN,
        'mutation { createEnvironment(input: { name: "prod", mode: MONOTONIC, requireApproval: false }) { name } }',
      );
    }
    // 20 plans of 1 MiB (the default PLANFENCE_MAX_PLAN_BYTES) for the list × content rows.
    const agent = await services.default.issueToken('bench-agent', 'AGENT');
    const { acquireLease } = await services.default.ok<{ acquireLease: { generation: number } }>(
      agent,
      'mutation { acquireLease(input: { environment: "prod", ttlSeconds: 3600 }) { generation } }',
    );
    for (let i = 0; i < 20; i++) {
      await services.default.ok(
        agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
        {
          input: {
            environment: 'prod',
            generation: acquireLease.generation,
            idempotencyKey: `bench-${i}`,
            content: String(i % 10).repeat(1024 * 1024),
          },
        },
      );
    }

    const json = (query: string) => JSON.stringify({ query });
    /** `n` tools/call get_plan over the 20 stored plans, in one JSON-RPC batch. */
    const getPlanBatch = (n: number) =>
      JSON.stringify(
        Array.from({ length: n }, (_, i) => ({
          jsonrpc: '2.0',
          id: i,
          method: 'tools/call',
          params: { name: 'get_plan', arguments: { planId: `prod@1.${(i % 20) + 1}` } },
        })),
      );
    const aliases50k = json(aliases(50_000, 'whoami { name }'));
    const typename300k = json(`{ ${'__typename '.repeat(300_000)}}`);
    const cases: Case[] = [
      {
        name: 'normal: `{ whoami { name role } }` with a viewer token',
        service: 'default',
        token: 'viewer',
        body: json('{ whoami { name role } }'),
        n: 200,
      },
      {
        name: '50,000 aliases of `whoami`, no token',
        service: 'default',
        token: null,
        body: aliases50k,
        n: 20,
      },
      {
        name: '50,000 aliases of `whoami`, no token, document cap raised to 4 MiB',
        service: 'roomy',
        token: null,
        body: aliases50k,
        n: 20,
      },
      {
        name: '50,000 aliases of `whoami`, no token, document and token caps raised',
        service: 'wide',
        token: null,
        body: aliases50k,
        n: 5,
      },
      {
        name: '300,000 `__typename`, no token',
        service: 'default',
        token: null,
        body: typename300k,
        n: 10,
      },
      {
        name: '300,000 `__typename`, no token, document cap raised to 4 MiB',
        service: 'roomy',
        token: null,
        body: typename300k,
        n: 20,
      },
      {
        name: '300,000 `__typename`, no token, document and token caps raised',
        service: 'wide',
        token: null,
        body: typename300k,
        n: 5,
      },
      {
        name: 'brackets nested 20,000 deep in an argument',
        service: 'default',
        token: 'viewer',
        body: json(`{ environment(name: ${'['.repeat(20_000)}${']'.repeat(20_000)}) { name } }`),
        n: 20,
      },
      {
        name: 'fragments spreading each other twice, 2^25 fields expanded',
        service: 'default',
        token: 'viewer',
        body: json(
          `{ environments { ...F0 } } ${Array.from({ length: 25 }, (_, i) => `fragment F${i} on Environment { ...F${i + 1} ...F${i + 1} }`).join(' ')} fragment F25 on Environment { name }`,
        ),
        n: 20,
      },
      {
        name: '10 aliases of `plans(first: 500) { content }` (20 plans of 1 MiB stored)',
        service: 'default',
        token: 'viewer',
        body: json(aliases(10, 'plans(environment: "prod", first: 500) { content }')),
        n: 20,
      },
      {
        name: 'one `plans(first: 500) { content }` (accepted: 20 MiB answered)',
        service: 'default',
        token: 'viewer',
        body: json('{ plans(environment: "prod", first: 500) { content } }'),
        n: 5,
      },
      {
        name: 'POST /mcp: a JSON-RPC batch of 100 `get_plan` (over the batch limit)',
        service: 'default',
        token: 'viewer',
        path: '/mcp',
        body: getPlanBatch(100),
        n: 20,
      },
      {
        name: 'POST /mcp: a JSON-RPC batch of 32 `get_plan` of 1 MiB plans (accepted, one slot)',
        service: 'default',
        token: 'viewer',
        path: '/mcp',
        body: getPlanBatch(32),
        n: 5,
      },
    ];
    const results = new Map<Case, Measured>(
      cases.map((c) => [
        c,
        {
          cpuMsPerRequest: [],
          latencyMs: [],
          outcomes: new Set(),
          bytes: Buffer.byteLength(c.body),
        },
      ]),
    );
    for (let round = 1; round <= runs; round++) {
      for (const c of cases) {
        const service = services[c.service];
        const token = c.token ? viewer[c.service] : null;
        const measured = results.get(c)!;
        await send(service, token, c.body, c.path); // warm-up
        const before = cpuMs(service.pid!);
        for (let i = 0; i < c.n; i++) {
          const { outcome, ms } = await send(service, token, c.body, c.path);
          measured.outcomes.add(outcome);
          measured.latencyMs.push(ms);
        }
        measured.cpuMsPerRequest.push((cpuMs(service.pid!) - before) / c.n);
        log(`round ${round}: ${c.name}`);
      }
    }

    // Attacks that last (subscriptions, a large masking submit), each with /health beside it.
    const scoped = (
      await services.default.ok<{ issueToken: { token: string } }>(
        ADMIN_TOKEN,
        'mutation { issueToken(name: "bench-scoped", role: VIEWER, environments: ["elsewhere"]) { token } }',
      )
    ).issueToken.token;
    const attacks: Attack[] = [
      {
        name: 'one `planPublished(after) { id content }` replaying 19 plans of 1 MiB',
        async run(service) {
          const s = await admittedSocket(service, viewer.default);
          s.subscribe(
            'r',
            'subscription { planPublished(environment: "prod", after: "prod@1.1") { id content } }',
            {},
          );
          await until(() => s.seen.next >= 19 || s.seen.error > 0, 120);
          s.ws.terminate();
          return `${s.seen.next} events${s.seen.error ? `, ${[...s.seen.codes.keys()].join(', ')}` : ''}`;
        },
      },
      {
        name: '20 sockets × 100 `auditEventRecorded(after: "1")` replays (one principal)',
        async run(service) {
          const sockets = await Promise.all(
            Array.from({ length: 20 }, () => admittedSocket(service, viewer.default)),
          );
          for (const s of sockets)
            for (let i = 0; i < 100; i++)
              s.subscribe(
                `r${i}`,
                'subscription { auditEventRecorded(environment: "prod", after: "1") { id action } }',
                {},
              );
          const answered = () => sockets.reduce((n, s) => n + s.seen.answered.size, 0);
          await until(() => answered() >= 2000, 120);
          const codes = new Set(sockets.flatMap((s) => [...s.seen.codes.keys()]));
          for (const s of sockets) s.ws.terminate();
          return `${answered()} answered; refused: ${[...codes].join(', ') || 'none'}`;
        },
      },
      {
        name: '1,200 FORBIDDEN subscriptions on one socket',
        async run(service) {
          const s = await admittedSocket(service, scoped);
          for (let i = 0; i < 1200; i++)
            s.subscribe(`f${i}`, 'subscription { planPublished(environment: "prod") { id } }', {});
          await Promise.race([s.closed, until(() => false, 120)]);
          s.ws.terminate();
          return `${s.seen.error} refused, socket closed ${s.seen.closed ?? 'never'}`;
        },
      },
      {
        name: 'submitPlan of a 630 KB Terraform document masking 30,000 sensitive strings in a 40,000-string attribute',
        async run(service) {
          const { acquireLease: lease } = await service.ok<{
            acquireLease: { generation: number };
          }>(
            agent,
            'mutation { acquireLease(input: { environment: "prod", ttlSeconds: 3600 }) { generation } }',
          );
          const answer = await send(
            service,
            agent,
            JSON.stringify({
              query: 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
              variables: {
                input: {
                  environment: 'prod',
                  generation: lease.generation,
                  idempotencyKey: `bench-mask-${performance.now()}`,
                  contentType: 'TERRAFORM_PLAN_JSON',
                  content: maskingHeavyDocument(),
                },
              },
            }),
          );
          return answer.outcome;
        },
      },
    ];
    const attackRows: string[] = [];
    for (const attack of attacks) {
      const idle: number[] = [];
      const during: number[] = [];
      const outcomes = new Set<string>();
      for (let round = 1; round <= runs; round++) {
        const quiet = probeHealth(services.default);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        idle.push(p99(await quiet.stop()));
        const probe = probeHealth(services.default);
        outcomes.add(await attack.run(services.default));
        during.push(p99(await probe.stop()));
        log(`round ${round}: ${attack.name}`);
        // Let the replay budgets refill between rounds (one minute's worth).
        if (round < runs) await new Promise((resolve) => setTimeout(resolve, 61_000));
      }
      attackRows.push(
        `| ${attack.name} | ${[...outcomes].join('; ')} | ${median(idle).toFixed(1)} | ${median(during).toFixed(1)} | ${(median(during) / median(idle)).toFixed(1)}× |`,
      );
    }

    const normal = median(results.get(cases[0])!.cpuMsPerRequest);
    const rows = cases.map((c) => {
      const m = results.get(c)!;
      const cpu = median(m.cpuMsPerRequest);
      return `| ${c.name} | ${(m.bytes / 1024).toFixed(m.bytes < 10_240 ? 2 : 0)} | ${[...m.outcomes].join(', ')} | ${cpu.toFixed(2)} | ${(cpu / normal).toFixed(1)}× | ${median(m.latencyMs).toFixed(1)} |`;
    });
    const cpuInfo =
      readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? 'unknown';
    const section = [
      '<!-- hostile:start -->',
      '## Hostile requests',
      '',
      `\`npm run bench:hostile\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} cores (${cpuInfo}), Node ${process.version}, SQLite, default limits (docs/limits.md) unless the row says otherwise. Each row sends its document sequentially (${cases.map((c) => c.n).join('/')} requests per round), ${runs} interleaved rounds; medians. CPU is the service process's user + system time per request (from /proc, ${1000 / TICKS_PER_SECOND} ms ticks over the round); latency is the client's wall time per request, body upload included.`,
      '',
      '| request | body KiB | answer | service CPU ms / request | × normal | latency ms (p50) |',
      '|---|---:|---|---:|---:|---:|',
      ...rows,
      '',
      'Before the limits, 50,000 aliases without a token blocked the event loop for 27 s and 300,000 `__typename` for 4.4 s; ten aliases of a 500-plan page with content built a 300 MB answer.',
      '',
      `Attacks that last, each with \`/health\` asked one request at a time beside it (p99 of its round trips during the attack, against the p99 of one idle second before it; ${runs} rounds a minute apart, medians):`,
      '',
      '| attack | what the service answered | /health p99 idle ms | /health p99 during ms | ratio |',
      '|---|---|---:|---:|---:|',
      ...attackRows,
      '',
      'Before these defences one replay of 579 plans of 170 KB stalled `/health` 4.0 s, 20 × 100 replaying subscriptions 42.5 s, 1,200 refused subscriptions 5–17 s, and the masking of such a document ran on the request thread.',
      '<!-- hostile:end -->',
      '',
    ].join('\n');
    const existing = existsSync(out) ? readFileSync(out, 'utf8') : '';
    const start = existing.indexOf('<!-- hostile:start -->');
    const end = existing.indexOf('<!-- hostile:end -->');
    const next =
      start >= 0 && end > start
        ? `${existing.slice(0, start)}${section}${existing.slice(end + '<!-- hostile:end -->\n'.length)}`
        : `${existing.trimEnd()}\n\n${section}`;
    writeFileSync(out, next);
    process.stdout.write(`${section}\n`);
  } finally {
    await services.default.stop();
    await services.roomy.stop();
    await services.wide.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
