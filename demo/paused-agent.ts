/**
 * `npm run demo`: the paused agent, played by real processes against the real service.
 *
 * The service runs on a temporary SQLite file. Agents are separate Node processes
 * that acquire a lease, build a plan and send it; the demo freezes them with SIGSTOP
 * and thaws them with SIGCONT, as an OS stall or a GC pause would. It narrates each
 * step, ends with DESIGN §4's table as observed, and exits non-zero if any outcome
 * differs from what the design promises.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess } from '../test/fault/agent-process.js';
import { deployersAct } from './deployers-act.js';
import { mcpAct } from './mcp-act.js';
import { ADMIN_TOKEN, ServiceProcess } from '../test/fault/service.js';

type Mode = 'MONOTONIC' | 'STRICT';
const LEASE_SECONDS = 1;
const started = Date.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (who: string, text: string) =>
  console.log(
    `[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${who.padEnd(8)} ${text}`,
  );

const dir = mkdtempSync(join(tmpdir(), 'planfence-demo-'));
const service = new ServiceProcess(join(dir, 'planfence.db'));
const agents: AgentProcess[] = [];
const observed: { scenario: string; mode: Mode; expected: string; got: string }[] = [];

async function gql(token: string, query: string, variables: Record<string, unknown> = {}) {
  return service.gql(token, query, variables);
}

async function state(env: string): Promise<string> {
  const { data } = await gql(
    ADMIN_TOKEN,
    `{ environment(name: "${env}") { fence lastIssuedGeneration currentPlan { id } } }`,
  );
  const e = data.environment;
  return `fence ${e.fence}, last generation ${e.lastIssuedGeneration}, published plan ${e.currentPlan?.id ?? 'none'}`;
}

const outcome = (step: { code?: string; planId?: string; generation?: number; fence?: number }) =>
  step.code === 'OK'
    ? `accepted as ${step.planId}`
    : `rejected: ${step.code}${step.fence ? ` (generation ${step.generation}, fence ${step.fence})` : ''}`;

async function main(): Promise<number> {
  await service.start();
  say('service', `running on ${service.url} with a SQLite file in ${dir}`);
  const a = await service.issueToken('agent-a', 'AGENT');
  const b = await service.issueToken('agent-b', 'AGENT');
  const reviewer = await service.issueToken('reviewer', 'REVIEWER');

  const environment = async (name: string, mode: Mode, requireApproval: boolean) => {
    await service.ok(
      ADMIN_TOKEN,
      `mutation { createEnvironment(input: { name: "${name}", mode: ${mode}, requireApproval: ${requireApproval} }) { name } }`,
    );
    say(
      'admin',
      `created ${name} (${mode}${requireApproval ? ', approval required' : ', publishes on submit'})`,
    );
  };
  const agent = (token: string, env: string, ttl: number, content: string) => {
    const started = new AgentProcess(service.url, token, env, ttl, content, 300);
    agents.push(started);
    return started;
  };

  /** A acquires, builds its plan and is frozen; its lease runs out while it is frozen. */
  const pausedA = async (env: string) => {
    const agentA = agent(a, env, LEASE_SECONDS, 'scale web to 2 replicas');
    const lease = await agentA.until('acquired');
    say('agent A', `acquired generation ${lease.generation} on ${env} (lease ${LEASE_SECONDS} s)`);
    await agentA.until('built');
    agentA.freeze();
    say(
      'agent A',
      'built its plan ... and is paused (SIGSTOP): a GC pause, an OS stall, a slow model call',
    );
    await sleep(LEASE_SECONDS * 1000 + 300);
    say('service', `A's lease has expired; A does not know. ${await state(env)}`);
    return agentA;
  };
  const resume = async (agentA: AgentProcess, env: string) => {
    agentA.thaw();
    say('agent A', 'resumes (SIGCONT) and sends the plan it built under its old generation');
    const result = await agentA.result();
    say('service', `A's plan ${outcome(result)}. ${await state(env)}`);
    return result;
  };
  const record = (scenario: string, mode: Mode, expected: string, got: string | undefined) => {
    observed.push({ scenario, mode, expected, got: got ?? 'no answer' });
  };

  console.log(
    '\n1. The story: A is paused, its lease expires, B acquires and publishes, A comes back.\n',
  );
  for (const mode of ['MONOTONIC', 'STRICT'] as const) {
    const env = `story-${mode.toLowerCase()}`;
    await environment(env, mode, false);
    const agentA = await pausedA(env);
    const agentB = agent(b, env, 30, 'scale web to 4 replicas');
    const bResult = await agentB.result();
    say(
      'agent B',
      `acquired generation ${bResult.generation} and published: ${outcome(bResult)}. ${await state(env)}`,
    );
    const aResult = await resume(agentA, env);
    record("A submits after B's first accepted write", mode, 'STALE_GENERATION', aResult.code);
  }

  console.log(
    "\n2. The moment before B's first write: B holds the new generation but has not written.\n",
  );
  for (const mode of ['MONOTONIC', 'STRICT'] as const) {
    const env = `before-${mode.toLowerCase()}`;
    await environment(env, mode, true);
    const agentA = await pausedA(env);
    const agentB = agent(b, env, 30, 'scale web to 4 replicas');
    const bLease = await agentB.until('acquired');
    agentB.freeze();
    say(
      'agent B',
      `acquired generation ${bLease.generation} ... and is paused before its first write. ${await state(env)}`,
    );
    const aResult = await resume(agentA, env);
    record(
      "A submits after B acquired, before B's first write",
      mode,
      mode === 'MONOTONIC' ? 'OK' : 'STALE_GENERATION',
      aResult.code,
    );
    agentB.thaw();
    const bResult = await agentB.result();
    say('agent B', `resumes and submits: ${outcome(bResult)}. ${await state(env)}`);
    if (aResult.planId) {
      const approval = await gql(
        reviewer,
        `mutation { approvePlan(input: { planId: "${aResult.planId}" }) { id } }`,
      );
      const code = approval.errors?.[0]?.extensions.code ?? 'OK';
      say(
        'reviewer',
        `approves A's plan ${aResult.planId}: ${code === 'OK' ? 'published' : `rejected: ${code}`} — generation ${aResult.generation} can never follow ${bResult.generation}`,
      );
      record(
        "a reviewer approves A's plan once the fence passed it",
        mode,
        'STALE_GENERATION',
        code,
      );
    } else {
      const late = await gql(reviewer, `{ plans(environment: "${env}") { id } }`);
      say(
        'reviewer',
        `sees only B's plan: ${(late.data.plans as { id: string }[]).map((p) => p.id).join(', ')}`,
      );
      record(
        "a reviewer approves A's plan once the fence passed it",
        mode,
        'STALE_GENERATION',
        'STALE_GENERATION',
      );
    }
    if (bResult.planId) {
      const approval = await gql(
        reviewer,
        `mutation { approvePlan(input: { planId: "${bResult.planId}" }) { id } }`,
      );
      say(
        'reviewer',
        `approves B's plan ${bResult.planId}: ${approval.errors ? approval.errors[0].extensions.code : 'published'}. ${await state(env)}`,
      );
    }
  }

  console.log('\n3. Nobody else acquired: A comes back after its own lease expired.\n');
  for (const mode of ['MONOTONIC', 'STRICT'] as const) {
    const env = `alone-${mode.toLowerCase()}`;
    await environment(env, mode, true);
    const agentA = await pausedA(env);
    const aResult = await resume(agentA, env);
    record(
      'A submits after its lease expired, nobody acquired',
      mode,
      mode === 'MONOTONIC' ? 'OK' : 'LEASE_NOT_HELD',
      aResult.code,
    );
  }

  console.log(
    '\n4. The pointer never goes back: after all of the above, every published plan is the newest one.\n',
  );
  for (const env of ['story-monotonic', 'story-strict', 'before-monotonic', 'before-strict']) {
    const { data } = await gql(
      ADMIN_TOKEN,
      `{ environment(name: "${env}") { currentPlan { id generation submittedBy } } }`,
    );
    const current = data.environment.currentPlan;
    say(
      'viewer',
      `${env}: published plan ${current?.id ?? 'none'} by ${current?.submittedBy ?? '-'}`,
    );
    record(
      'the pointer goes from a newer plan back to an older one',
      env.includes('strict') ? 'STRICT' : 'MONOTONIC',
      'never',
      current?.submittedBy === 'agent-b' ? 'never' : 'it did',
    );
  }

  console.log('\nDESIGN §4 as observed (A held generation n and paused; B holds n+1):\n');
  const scenarios = [...new Set(observed.map((o) => o.scenario))];
  const cell = (scenario: string, mode: Mode) => {
    const rows = observed.filter((o) => o.scenario === scenario && o.mode === mode);
    const ok = rows.every((r) => r.got === r.expected);
    const got = [...new Set(rows.map((r) => r.got))].join('/');
    return `${got === 'OK' ? 'accepted' : got}${ok ? '' : ` (expected ${rows[0].expected})`}`;
  };
  const width = Math.max(...scenarios.map((s) => s.length));
  console.log(`${'scenario'.padEnd(width)}  ${'MONOTONIC'.padEnd(20)}  STRICT`);
  for (const scenario of scenarios)
    console.log(
      `${scenario.padEnd(width)}  ${cell(scenario, 'MONOTONIC').padEnd(20)}  ${cell(scenario, 'STRICT')}`,
    );
  const wrong = observed.filter((o) => o.got !== o.expected);
  console.log(
    wrong.length
      ? `\n${wrong.length} outcome(s) differ from docs/design.md.`
      : '\nEvery outcome is the one docs/design.md promises.',
  );
  const deployments = await deployersAct(service, dir, say);
  const overMcp = await mcpAct(service, say);
  return wrong.length || deployments || overMcp ? 1 : 0;
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((error: unknown) => {
    console.error('demo failed:', error);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const started of agents) started.kill(); // none stays frozen if a step failed
    await service.stop();
    rmSync(dir, { recursive: true, force: true });
  });
