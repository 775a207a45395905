/**
 * The pause harness with deployers (`npm run test:fault -- --deployers`). Real deployer
 * processes (this file, run with `child`) against the real service, applying the current
 * plan with the client's withDeployment to a file destination that fences by the
 * deployment sequence (examples/deployer.ts).
 *
 * In each round, on a fresh environment, deployer D1 starts a deployment of plan P1 with a
 * 5-second heartbeat and is frozen with SIGSTOP at a chosen point (before it applies, or
 * after it applied and before it reports). Its heartbeat lapses and the deployment reads
 * UNKNOWN. Then, depending on the round: a reviewer reconciles it and deployer D2 deploys a
 * newer plan P2; or a reviewer only reconciles it; or nobody does anything. D1 is thawed.
 *
 * A watcher samples every active environment's deployments and destination throughout. At
 * the end a checker that knows only the API, the audit log and the destination judges:
 *   - no two deployments of an environment were ever active (IN_PROGRESS/UNKNOWN) at once;
 *   - sequences go 1, 2, ... and each deployment started after the one before ended;
 *   - no report (heartbeat, finish) of a deployment was accepted after its reconcile;
 *   - the destination's sequence never went down, and it holds the plan of that sequence;
 *   - D1's outcome is the one R19/R20 give for what happened while it was frozen.
 *
 *   npm run test:fault -- --deployers --rounds 300 --parallel 12 --seed 7
 */
import { rmSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { applyToFile, StaleDeploymentError } from '../../examples/deployer.js';
import { PlanfenceClient } from '../../src/client/client.js';
import { DeploymentNotActiveError, Deployments } from '../../src/client/deployments.js';
import { ADMIN_TOKEN, deploy, distFile, option, seededRandom, textOption } from './service.js';

interface Step {
  step: 'started' | 'applied' | 'result';
  sequence?: number;
  code?: string;
}

const HEARTBEAT_SECONDS = 5;
/** How long the deployer lingers at each pause point, so that the harness freezes it there. */
const PAUSE_WINDOW_MS = 500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The deployer child: deploys the current plan of ENV to FILE, reporting its steps as JSON lines. */
async function child(url: string, token: string, environment: string, file: string) {
  const say = (step: Step) => process.stdout.write(`${JSON.stringify(step)}\n`);
  const deployments = new Deployments(new PlanfenceClient({ url, token }));
  try {
    await deployments.withDeployment(
      environment,
      async ({ plan, sequence, signal }) => {
        say({ step: 'started', sequence });
        await sleep(PAUSE_WINDOW_MS); // the harness may freeze us here
        signal.throwIfAborted();
        await applyToFile(file, sequence, plan);
        say({ step: 'applied', sequence });
        await sleep(PAUSE_WINDOW_MS); // or here
        return 'applied';
      },
      { heartbeatSeconds: HEARTBEAT_SECONDS, heartbeatEveryMs: 1000 },
    );
    say({ step: 'result', code: 'OK' });
  } catch (error) {
    const code =
      error instanceof DeploymentNotActiveError
        ? 'DEPLOYMENT_NOT_ACTIVE'
        : error instanceof StaleDeploymentError
          ? 'DESTINATION_REFUSED'
          : ((error as { code?: string }).code ??
            `ERROR ${(error as Error).name}: ${(error as Error).message}`);
    say({ step: 'result', code });
  }
}

/** The harness's handle on one deployer process. */
export class DeployerProcess {
  private readonly steps: Step[] = [];
  private wake: (() => void)[] = [];
  private closed = false;
  private readonly process;

  constructor(url: string, token: string, environment: string, file: string) {
    this.process = spawn(
      process.execPath,
      [distFile('test/fault/deployers.js'), 'child', url, token, environment, file],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    createInterface({ input: this.process.stdout }).on('line', (line) => {
      this.steps.push(JSON.parse(line) as Step);
      for (const w of this.wake.splice(0)) w();
    });
    this.process.once('close', () => {
      this.closed = true;
      for (const w of this.wake.splice(0)) w();
    });
  }

  async until(step: Step['step']): Promise<Step> {
    for (;;) {
      const seen =
        this.steps.find((s) => s.step === step) ?? this.steps.find((s) => s.step === 'result');
      if (seen) return seen;
      if (this.closed) throw new Error(`deployer exited before ${step}`);
      await new Promise<void>((resolve) => this.wake.push(resolve));
    }
  }

  freeze = () => this.process.kill('SIGSTOP');
  thaw = () => this.process.kill('SIGCONT');
  kill = () => {
    if (!this.closed) this.process.kill('SIGKILL');
  };
}

interface DeploymentRow {
  id: string;
  sequence: number;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  reconciledBy: string | null;
  plan: { id: string };
}

export interface DeployersReport {
  rounds: number;
  pauses: number;
  /** Rounds whose deployer finished before it could be frozen. */
  skipped: number;
  violations: string[];
  seed: number;
}

export async function runDeployersHarness(options: {
  rounds: number;
  seed: number;
  parallel: number;
  postgres?: string | null;
  instances?: number;
}): Promise<DeployersReport> {
  const random = seededRandom(options.seed);
  const deployment = await deploy(options, 'deployers');
  const { instances } = deployment;
  const service = instances[0];
  const dir = mkdtempSync(join(tmpdir(), 'planfence-destinations-'));
  const violations: string[] = [];
  const spawned = new Set<DeployerProcess>();
  let pauses = 0;
  let skipped = 0;
  const active = new Set<string>();
  let watching = true;
  try {
    const tokens = {
      agent: await service.issueToken('agent', 'AGENT'),
      d1: await service.issueToken('d1', 'DEPLOYER'),
      d2: await service.issueToken('d2', 'DEPLOYER'),
      reviewer: await service.issueToken('reviewer', 'REVIEWER'),
    };
    const destination = (environment: string) => join(dir, `${environment}.json`);
    const readDestination = (environment: string) => {
      try {
        return JSON.parse(readFileSync(destination(environment), 'utf8')) as {
          sequence: number;
          planId: string;
        };
      } catch {
        return null;
      }
    };
    const publish = async (environment: string) => {
      const { acquireLease } = await service.ok<{ acquireLease: { generation: number } }>(
        tokens.agent,
        'mutation($e: String!) { acquireLease(input: { environment: $e }) { generation } }',
        { e: environment },
      );
      const { submitPlan } = await service.ok<{ submitPlan: { id: string } }>(
        tokens.agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
        {
          input: {
            environment,
            generation: acquireLease.generation,
            content: `plan of ${environment} at ${acquireLease.generation}`,
            idempotencyKey: `${environment}-${acquireLease.generation}`,
          },
        },
      );
      await service.ok(
        tokens.agent,
        'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
        { e: environment, g: acquireLease.generation },
      );
      return submitPlan.id;
    };
    const list = async (environment: string) =>
      (
        await service.ok<{ deployments: DeploymentRow[] }>(
          ADMIN_TOKEN,
          'query($e: String!) { deployments(environment: $e, first: 500) { id sequence status startedAt finishedAt reconciledBy plan { id } } }',
          { e: environment },
        )
      ).deployments;

    // The watcher: never two active deployments; the destination never goes back.
    const lastApplied = new Map<string, number>();
    const watcher = (async () => {
      while (watching) {
        for (const environment of [...active]) {
          const rows = await list(environment).catch(() => []);
          const live = rows.filter((r) => r.status === 'IN_PROGRESS' || r.status === 'UNKNOWN');
          if (live.length > 1)
            violations.push(`${environment}: ${live.map((r) => r.id).join(', ')} active at once`);
          const applied = readDestination(environment);
          const last = lastApplied.get(environment) ?? 0;
          if (applied && applied.sequence < last)
            violations.push(
              `${environment}: destination went back from ${last} to ${applied.sequence}`,
            );
          if (applied) lastApplied.set(environment, Math.max(last, applied.sequence));
        }
        await sleep(100);
      }
    })();

    const rounds = Array.from({ length: options.rounds }, (_, index) => ({
      index,
      environment: `deploy-${index}`,
      pauseAt: (['before applying', 'after applying'] as const)[random(2)],
      order: (
        [
          'reconciled, D2 deployed a newer plan',
          'reconciled, D2 deployed a newer plan',
          'reconciled only',
          'nobody acted',
        ] as const
      )[random(4)],
      reconcileAs: random(2) ? 'FAILED' : 'SUCCEEDED',
    }));

    const play = async (round: (typeof rounds)[number]) => {
      const { environment } = round;
      await service.ok(
        ADMIN_TOKEN,
        'mutation($n: String!) { createEnvironment(input: { name: $n, requireApproval: false }) { name } }',
        { n: environment },
      );
      active.add(environment);
      await publish(environment);
      const d1 = new DeployerProcess(service.url, tokens.d1, environment, destination(environment));
      spawned.add(d1);
      const point = await d1.until(round.pauseAt === 'before applying' ? 'started' : 'applied');
      if (point.step === 'result') {
        violations.push(`${environment}: D1 ended before it could be paused: ${point.code}`);
        return;
      }
      d1.freeze();
      // Until the service itself says the heartbeat lapsed. On a loaded machine D1 may have
      // finished before the freeze landed: then there is nothing to pause, and the round is skipped.
      for (;;) {
        const [row] = await list(environment);
        if (row.status === 'UNKNOWN') break;
        if (row.status !== 'IN_PROGRESS') {
          d1.thaw();
          skipped++;
          await d1.until('result');
          violations.push(...(await check(environment)));
          active.delete(environment);
          return;
        }
        await sleep(250);
      }
      pauses++;
      const [first] = await list(environment);
      if (round.order !== 'nobody acted') {
        await service.ok(
          tokens.reviewer,
          'mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { id } }',
          {
            input: { deploymentId: first.id, outcome: round.reconcileAs, note: 'checked by hand' },
          },
        );
      }
      if (round.order === 'reconciled, D2 deployed a newer plan') {
        await publish(environment);
        const d2 = new DeployerProcess(
          service.url,
          tokens.d2,
          environment,
          destination(environment),
        );
        spawned.add(d2);
        const result = await d2.until('result');
        if (result.code !== 'OK') violations.push(`${environment}: D2 got ${result.code}`);
      }
      d1.thaw();
      const outcome = await d1.until('result');
      const expected =
        round.order === 'nobody acted'
          ? ['OK']
          : round.order === 'reconciled only'
            ? ['DEPLOYMENT_NOT_ACTIVE']
            : round.pauseAt === 'before applying'
              ? ['DESTINATION_REFUSED', 'DEPLOYMENT_NOT_ACTIVE']
              : ['DEPLOYMENT_NOT_ACTIVE'];
      if (!expected.includes(outcome.code ?? ''))
        violations.push(
          `${environment}: D1 (paused ${round.pauseAt}, ${round.order}) got ${outcome.code}, expected ${expected.join(' or ')}`,
        );
      violations.push(...(await check(environment)));
      active.delete(environment);
    };

    const check = async (environment: string): Promise<string[]> => {
      const problems: string[] = [];
      const rows = (await list(environment)).reverse();
      rows.forEach((row, i) => {
        if (row.sequence !== i + 1)
          problems.push(`${environment}: sequence ${row.sequence} at ${i + 1}`);
        const previous = rows[i - 1];
        if (previous && (!previous.finishedAt || previous.finishedAt > row.startedAt))
          problems.push(`${environment}: ${row.id} started before ${previous.id} ended`);
      });
      const { auditEvents } = await service.ok<{
        auditEvents: { id: string; action: string; outcome: string; detail: string | null }[];
      }>(
        ADMIN_TOKEN,
        'query($e: String!) { auditEvents(environment: $e, first: 500) { id action outcome detail } }',
        { e: environment },
      );
      const events = auditEvents.reverse();
      for (const row of rows.filter((r) => r.reconciledBy)) {
        const mentions = (e: { detail: string | null }) =>
          e.detail?.startsWith(`deployment ${row.id} `);
        const reconciled = events.find(
          (e) => e.action === 'RECONCILE_DEPLOYMENT' && e.outcome === 'ACCEPTED' && mentions(e),
        );
        const late = events.filter(
          (e) =>
            ['FINISH_DEPLOYMENT', 'HEARTBEAT_DEPLOYMENT'].includes(e.action) &&
            e.outcome === 'ACCEPTED' &&
            mentions(e) &&
            Number(e.id) > Number(reconciled?.id ?? Infinity),
        );
        if (late.length)
          problems.push(`${environment}: ${row.id} took a report after its reconcile`);
      }
      const applied = readDestination(environment);
      const highest = Math.max(0, ...rows.map((r) => r.sequence));
      if (applied) {
        const row = rows.find((r) => r.sequence === applied.sequence);
        if (!row || row.plan.id !== applied.planId)
          problems.push(
            `${environment}: destination holds ${applied.planId} under sequence ${applied.sequence}`,
          );
        if (
          applied.sequence < highest &&
          rows.at(-1)?.status === 'SUCCEEDED' &&
          !rows.at(-1)?.reconciledBy
        )
          problems.push(
            `${environment}: destination at ${applied.sequence}, last success ${highest}`,
          );
      }
      return problems;
    };

    let next = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: options.parallel }, async () => {
        while (next < rounds.length) {
          const round = rounds[next++];
          await play(round).catch((error: unknown) =>
            violations.push(`${round.environment}: harness error ${(error as Error).message}`),
          );
          if (++done % 50 === 0)
            console.log(
              `deployers harness: ${done}/${rounds.length} rounds, ${violations.length} violations so far`,
            );
        }
      }),
    );
    watching = false;
    await watcher;
  } finally {
    watching = false;
    for (const deployer of spawned) deployer.kill();
    await deployment.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return { rounds: options.rounds, pauses, skipped, violations, seed: options.seed };
}

/** `npm run test:fault -- --deployers [--rounds N] [--seed S] [--parallel P] [--postgres URL --instances N]` */
export async function main(argv: string[]): Promise<void> {
  const report = await runDeployersHarness({
    rounds: option(argv, 'rounds', 100),
    seed: option(argv, 'seed', Date.now() % 1_000_000),
    parallel: option(argv, 'parallel', 12),
    postgres: textOption(argv, 'postgres'),
    instances: option(argv, 'instances', 1),
  });
  for (const violation of report.violations) console.error(violation);
  console.log(
    `deployers: rounds=${report.rounds} pauses=${report.pauses} skipped=${report.skipped} violations=${report.violations.length} seed=${report.seed}`,
  );
  process.exitCode = report.violations.length ? 1 : 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href && process.argv[2] === 'child') {
  const [url, token, environment, file] = process.argv.slice(3);
  await child(url, token, environment, file);
}
