/**
 * The pause harness. Real agent processes against the real service (a child process
 * on a temporary SQLite file). In each round, agent A takes a 1-second lease on a
 * fresh environment and is frozen with SIGSTOP at a chosen point (right after
 * acquiring, after building its plan, or while its request is in flight). Its lease
 * expires. Then, depending on the round: agent B acquires and publishes, or B acquires
 * and is itself frozen before its first write, or nobody acquires. A is thawed with
 * SIGCONT and carries on with its old generation.
 *
 * A watcher samples every active environment's pointer and fence throughout. At the end
 * a checker that knows only the API and the audit log judges every environment:
 *   - the pointer never moved backwards in (generation, sequence), nor the fence down;
 *   - generations were granted one by one, none twice (several instances included);
 *   - STRICT: no write accepted with a generation below a grant made before it;
 *   - MONOTONIC: no write accepted below the highest generation accepted before it;
 *   - every accepted plan is stored whole (its content and sha256 as sent);
 *   - every rejection has its code, and A's outcome is the one DESIGN §4 gives for the
 *     order in which the audit log says things happened.
 *
 *   npm run test:fault -- --rounds 1000 --seed 7 --parallel 8
 *   npm run test:fault -- --rounds 300 --postgres postgres://user:pw@127.0.0.1/postgres --instances 2
 */
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { AgentProcess, type AgentStep } from './agent-process.js';
import {
  ADMIN_TOKEN,
  deploy,
  option,
  seededRandom,
  type ServiceProcess,
  textOption,
} from './service.js';

type Mode = 'MONOTONIC' | 'STRICT';
type PausePoint = 'acquired' | 'built' | 'sending';
type Order = 'B published first' | 'B acquired, not yet written' | 'nobody acquired';

interface Round {
  index: number;
  environment: string;
  mode: Mode;
  requireApproval: boolean;
  pauseAt: PausePoint;
  order: Order;
  /** Which service instance each agent talks to. */
  instanceOf: { A: number; B: number };
  a?: AgentStep;
  b?: AgentStep;
  contents: Map<string, string>;
}

interface AuditEvent {
  id: string;
  at: string;
  action: string;
  actor: string;
  outcome: 'ACCEPTED' | 'REJECTED';
  code: string | null;
  generation: number | null;
  planId: string | null;
}

export interface PauseReport {
  rounds: number;
  pauses: number;
  violations: string[];
  seed: number;
}

const LEASE_SECONDS = 1;
const STEP_DELAY_MS = 150;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const position = (planId: string) =>
  planId.split('@')[1].split('.').map(Number) as [number, number];
const before = (x: [number, number], y: [number, number]) =>
  x[0] < y[0] || (x[0] === y[0] && x[1] < y[1]);

export async function runPauseHarness(options: {
  rounds: number;
  seed: number;
  parallel: number;
  /** A PostgreSQL server to run on instead of a SQLite file. */
  postgres?: string | null;
  /** Service instances sharing the database (PostgreSQL); agents are spread over them. */
  instances?: number;
}): Promise<PauseReport> {
  const random = seededRandom(options.seed);
  const deployment = await deploy(options, 'pause');
  const { instances } = deployment;
  const service = instances[0];
  const violations: string[] = [];
  let pauses = 0;
  /** Every agent process started, so that none outlives the run (a failed round may leave one frozen). */
  const spawned = new Set<AgentProcess>();
  const track = (agent: AgentProcess) => {
    spawned.add(agent);
    return agent;
  };
  try {
    const agentA = await service.issueToken('agent-a', 'AGENT');
    const agentB = await service.issueToken('agent-b', 'AGENT');
    const reviewer = await service.issueToken('reviewer', 'REVIEWER');

    // Every round's choices are drawn up front from the seed: the same seed plays the same rounds.
    const rounds: Round[] = Array.from({ length: options.rounds }, (_, index) => {
      const mode: Mode = random(2) ? 'STRICT' : 'MONOTONIC';
      return {
        index,
        environment: `round-${index}-${mode.toLowerCase()}`,
        mode,
        requireApproval: random(4) === 0,
        pauseAt: (['acquired', 'built', 'sending'] as const)[random(3)],
        order: (['B published first', 'B acquired, not yet written', 'nobody acquired'] as const)[
          random(3)
        ],
        instanceOf: { A: random(instances.length), B: random(instances.length) },
        contents: new Map(),
      };
    });

    const watcher = new Watcher(service);
    const watching = watcher.run();

    async function play(round: Round): Promise<void> {
      await service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        {
          input: {
            name: round.environment,
            mode: round.mode,
            requireApproval: round.requireApproval,
          },
        },
      );
      watcher.active.add(round.environment);
      const agent = (token: string, who: 'A' | 'B', ttl: number) =>
        track(
          new AgentProcess(
            instances[round.instanceOf[who]].url,
            token,
            round.environment,
            ttl,
            `plan by ${who} in round ${round.index}: ${'x'.repeat(round.index % 50)}`,
            STEP_DELAY_MS,
          ),
        );

      const a = agent(agentA, 'A', LEASE_SECONDS);
      await a.until(round.pauseAt);
      a.freeze();
      pauses++;
      await sleep(LEASE_SECONDS * 1000 + 150); // A's lease expires while it is frozen.

      let b: AgentProcess | null = null;
      if (round.order !== 'nobody acquired') {
        b = agent(agentB, 'B', 30);
        if (round.order === 'B acquired, not yet written') {
          await b.until('acquired');
          b.freeze();
          pauses++;
        } else {
          round.b = await b.result();
        }
      }
      a.thaw();
      round.a = await a.result();
      if (b && round.order === 'B acquired, not yet written') {
        b.thaw();
        round.b = await b.result();
      }
      if (!b) {
        b = agent(agentB, 'B', 30);
        round.b = await b.result();
      }
      round.contents.set('agent-a', a.content);
      round.contents.set('agent-b', b.content);
      await Promise.all([a.exited, b.exited]);

      if (round.requireApproval) {
        // The reviewer approves every proposal, oldest first; the guard decides which can publish.
        const plans = (
          await service.ok(
            reviewer,
            'query($e: String!) { plans(environment: $e, status: PROPOSED) { id } }',
            { e: round.environment },
          )
        ).plans as { id: string }[];
        for (const { id } of plans.reverse()) {
          await service.gql(
            reviewer,
            'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
            { id },
          );
        }
      }
      watcher.active.delete(round.environment);
    }

    let played = 0;
    const progressEvery = Math.max(10, Math.ceil(options.rounds / 10));
    const queue = [...rounds];
    await Promise.all(
      Array.from({ length: options.parallel }, async () => {
        for (let round = queue.shift(); round; round = queue.shift()) {
          await play(round).catch((error: unknown) =>
            violations.push(`${round.environment}: the round failed: ${String(error)}`),
          );
          if (++played % progressEvery === 0 && played < options.rounds) {
            process.stderr.write(
              `pause harness: ${played}/${options.rounds} rounds, ${pauses} pauses, ${watcher.violations.length + violations.length} violations so far\n`,
            );
          }
        }
      }),
    );
    watcher.stop();
    await watching;
    violations.push(...watcher.violations);
    for (const round of rounds) violations.push(...(await judge(service, round)));
  } finally {
    for (const agent of spawned) agent.kill();
    await deployment.stop();
  }
  return { rounds: options.rounds, pauses, violations, seed: options.seed };
}

/** Samples pointers and fences of the environments in play; any step backwards is a violation. */
class Watcher {
  readonly active = new Set<string>();
  readonly violations: string[] = [];
  private readonly last = new Map<string, { fence: number; pointer: [number, number] }>();
  private stopped = false;

  constructor(private readonly service: ServiceProcess) {}

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<void> {
    while (!this.stopped) {
      const names = [...this.active];
      if (names.length)
        await this.sample(names).catch((error: unknown) =>
          this.violations.push(`watcher could not read the service: ${String(error)}`),
        );
      await sleep(20);
    }
  }

  private async sample(names: string[]): Promise<void> {
    const query = names
      .map((n, i) => `e${i}: environment(name: "${n}") { name fence currentPlan { id } }`)
      .join('\n');
    const result = await this.service.gql<
      Record<string, { name: string; fence: number; currentPlan: { id: string } | null }>
    >(ADMIN_TOKEN, `{ ${query} }`);
    for (const env of Object.values(result.data ?? {})) {
      const pointer: [number, number] = env.currentPlan ? position(env.currentPlan.id) : [0, 0];
      const previous = this.last.get(env.name);
      if (previous && before(pointer, previous.pointer)) {
        this.violations.push(
          `${env.name}: pointer moved back from ${previous.pointer.join('.')} to ${pointer.join('.')}`,
        );
      }
      if (previous && env.fence < previous.fence) {
        this.violations.push(
          `${env.name}: fence moved down from ${previous.fence} to ${env.fence}`,
        );
      }
      this.last.set(env.name, { fence: env.fence, pointer });
    }
  }
}

const KNOWN_CODES = new Set([
  'STALE_GENERATION',
  'LEASE_NOT_HELD',
  'UNKNOWN_GENERATION',
  'INVALID_PLAN_STATE',
  'PRECONDITION_FAILED',
  'LEASE_HELD',
]);

/** Judges one round from the API and the audit log alone. */
async function judge(service: ServiceProcess, round: Round): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const events = (
    (
      await service.ok(
        ADMIN_TOKEN,
        'query($e: String!) { auditEvents(environment: $e, first: 500) { id at action actor outcome code generation planId } }',
        { e: env },
      )
    ).auditEvents as AuditEvent[]
  ).reverse();

  let highestGrant = 0;
  let highestAccepted = 0;
  let pointer: [number, number] = [0, 0];
  for (const event of events) {
    if (event.outcome === 'REJECTED' && !event.code)
      problems.push(`${env}: rejection without a code (event ${event.id})`);
    if (event.outcome !== 'ACCEPTED') continue;
    if (event.action === 'ACQUIRE_LEASE') {
      if (event.generation !== highestGrant + 1) {
        problems.push(
          `${env}: granted generation ${event.generation} after ${highestGrant} (generations go up by one, never twice)`,
        );
      }
      highestGrant = Math.max(highestGrant, event.generation!);
    }
    if (event.action === 'SUBMIT_PLAN') {
      const g = event.generation!;
      if (round.mode === 'STRICT' && g < highestGrant)
        problems.push(`${env}: STRICT accepted generation ${g} after granting ${highestGrant}`);
      if (round.mode === 'MONOTONIC' && g < highestAccepted)
        problems.push(
          `${env}: MONOTONIC accepted generation ${g} after accepting ${highestAccepted}`,
        );
      highestAccepted = Math.max(highestAccepted, g);
    }
    const publishes =
      event.action === 'APPROVE_PLAN' || (event.action === 'SUBMIT_PLAN' && !round.requireApproval);
    if (publishes && event.planId) {
      const next = position(event.planId);
      if (!before(pointer, next))
        problems.push(`${env}: publication of ${event.planId} after ${pointer.join('.')}`);
      pointer = next;
    }
    if (event.action === 'SUBMIT_PLAN' && event.planId) {
      const plan = (
        await service.ok(
          ADMIN_TOKEN,
          'query($id: ID!) { plan(id: $id) { content contentHash submittedBy } }',
          { id: event.planId },
        )
      ).plan;
      const sent = round.contents.get(event.actor);
      if (
        !plan ||
        plan.content !== sent ||
        plan.contentHash !== createHash('sha256').update(plan.content).digest('hex')
      ) {
        problems.push(`${env}: accepted plan ${event.planId} is not stored whole`);
      }
    }
  }

  for (const [who, step] of [
    ['A', round.a],
    ['B', round.b],
  ] as const) {
    if (!step) problems.push(`${env}: agent ${who} reported no result`);
    else if (step.code !== 'OK' && !KNOWN_CODES.has(step.code ?? ''))
      problems.push(`${env}: agent ${who} got ${step.code}`);
  }
  const expected = expectedForA(round, events);
  if (round.a && expected && round.a.code !== expected) {
    problems.push(
      `${env}: A got ${round.a.code}, DESIGN §4 says ${expected} (${round.mode}, ${round.order}, paused at ${round.pauseAt})`,
    );
  }
  if (problems.length)
    problems.push(
      `${env} history:\n${events.map((e) => `    ${e.id} ${e.at} ${e.actor} ${e.action} g=${e.generation} ${e.outcome} ${e.code ?? ''} ${e.planId ?? ''}`).join('\n')}`,
    );
  return problems;
}

/** What §4 says A's submit must get, given what the audit log says happened before it was decided. */
function expectedForA(round: Round, events: AuditEvent[]): string | null {
  const aSubmit = events.find((e) => e.actor === 'agent-a' && e.action === 'SUBMIT_PLAN');
  const aAcquire = events.find(
    (e) => e.actor === 'agent-a' && e.action === 'ACQUIRE_LEASE' && e.outcome === 'ACCEPTED',
  );
  if (!aSubmit || !aAcquire) return null;
  const earlier = events.filter(
    (e) => Number(e.id) < Number(aSubmit.id) && e.actor === 'agent-b' && e.outcome === 'ACCEPTED',
  );
  if (earlier.some((e) => e.action === 'SUBMIT_PLAN')) return 'STALE_GENERATION';
  if (earlier.some((e) => e.action === 'ACQUIRE_LEASE'))
    return round.mode === 'MONOTONIC' ? 'OK' : 'STALE_GENERATION';
  const expired = Date.parse(aSubmit.at) >= Date.parse(aAcquire.at) + LEASE_SECONDS * 1000;
  return round.mode === 'STRICT' && expired ? 'LEASE_NOT_HELD' : 'OK';
}

// `--deployers`: paused deployer processes instead of agents (test/fault/deployers.ts).
const deployers = process.argv.includes('--deployers');
if (deployers && import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  await (await import('./deployers.js')).main(process.argv.slice(2));

if (!deployers && import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  const report = await runPauseHarness({
    rounds: option(argv, 'rounds', 100),
    seed: option(argv, 'seed', Date.now() % 1_000_000),
    parallel: option(argv, 'parallel', 8),
    postgres: textOption(argv, 'postgres'),
    instances: option(argv, 'instances', 1),
  });
  for (const violation of report.violations) console.error(violation);
  console.log(
    `rounds=${report.rounds} pauses=${report.pauses} violations=${report.violations.filter((v) => !v.includes(' history:')).length} seed=${report.seed}`,
  );
  process.exitCode = report.violations.length ? 1 : 0;
}
