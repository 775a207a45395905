/**
 * The pause harness. Real agent processes against the real service (a child process
 * on a temporary SQLite file). In each round, agent A takes a 1-second lease on a
 * fresh environment and is frozen with SIGSTOP at a chosen point (right after
 * acquiring, after building its plan, or while its request is in flight). Its lease
 * expires. Then, depending on the round: agent B acquires and publishes, or B acquires
 * and is itself frozen before its first write, or nobody acquires. A is thawed with
 * SIGCONT and carries on with its old generation.
 *
 * In a quorum round the environment needs two approvals (R14): A submits its plan, its
 * lease expires, and then two reviewers approve A's plan concurrently while agent B
 * acquires and submits (fencing A's generation), B frozen for a moment after acquiring.
 * Whatever the interleaving, A's plan is published only by the second approval and only
 * if that approval came before the fence moved past A's generation; an approval after it
 * is STALE_GENERATION, and a plan left with one approval reads OBSOLETE.
 *
 * In a stale-plan round (R33) the environment already has a published plan. Agent A takes
 * a long lease, reads the environment's deployment sequence while it builds its plan, and
 * is frozen before sending it. A deployer deploys the published plan meanwhile. A is thawed
 * and submits, its lease still live, so no fence stops it: its plan, made against the
 * sequence before that deployment, is refused at submit with nothing stored (R57:
 * PRECONDITION_FAILED {reason: DEPLOYMENT_SEQUENCE, deploymentSequence: 1}).
 *
 * In a state round (every fourth round from the second; R56, R57), with the real terraform
 * (skipped where it is not on PATH), the environment's infrastructure is a Terraform working
 * directory with a local state. Agent A runs `terraform plan -out` from the state as it is
 * and is frozen before it takes its lease and submits the plan file. Meanwhile agent B plans
 * from the same state, submits and lets its lease go, a reviewer approves (publishes) B's
 * plan, and a deployer applies it: startDeployment, `terraform apply` of the plan file the
 * service hands out, `terraform state pull`, finishDeployment with the state's lineage and
 * serial. The state's serial moves. A is thawed before the start, after the apply or after
 * the report, and submits its old plan file (with the deployment sequence it read before
 * planning, or without) under a lease it takes only then, so no fence stops it: the state
 * does. Refused PRECONDITION_FAILED {reason: STATE_SERIAL} (DEPLOYMENT_SEQUENCE where it
 * named a sequence that has moved) with nothing stored; or, where it came before the base
 * moved, stored and OBSOLETE from the moment the start or the report moved it, and neither
 * approvable nor deployable. The state holds B's apply and nothing of A's; the pointer
 * never pointed at A's plan.
 * In a queue round (every fourth round) A and B wait in the environment's lease queue
 * (R37–R39) behind a lease the harness holds. The harness releases it: A's ticket is
 * granted a 1-second lease and A is frozen the moment it reads the grant. Its lease runs
 * out with no traffic; the sweeper grants B's ticket, and B publishes. A is thawed and
 * sends its plan under the generation it was granted: it must be rejected, and B must
 * have been granted at all (the queue never stalls on a paused waiter).
 *
 * In a check round (every eighth round from the seventh; R50) the environment requires check
 * `scan` besides an approval. Agent A's plan is approved and waits for the check. A CHECKER
 * process reads A's plan, as a scanner does before it judges it, and is frozen before it
 * reports. Meanwhile agent B acquires (fencing A's generation) and submits a newer plan, which
 * the reviewer approves and, in every other check round, the harness's own scan passes
 * (publishing it). The CHECKER is thawed and reports SUCCESS on the plan it read: the
 * report is refused (INVALID_PLAN_STATE {status: OBSOLETE}, or STALE_GENERATION), records
 * nothing, and A's plan is never published.
 *
 * A watcher samples every active environment's pointer and fence throughout. At the end
 * a checker that knows only the API and the audit log judges every environment:
 *   - the pointer never moved backwards in (generation, sequence), nor the fence down;
 *   - generations were granted one by one, none twice (several instances included);
 *   - STRICT: no write accepted with a generation below a grant made before it;
 *   - MONOTONIC: no write accepted below the highest generation accepted before it;
 *   - every accepted plan is stored whole (its content and sha256 as sent);
 *   - every rejection has its code, and A's outcome is the one DESIGN §4 gives for the
 *     order in which the audit log says things happened;
 *   - quorum rounds: as above for the two concurrent approvals;
 *   - stale-plan rounds: A's plan was never published, and was refused for R33;
 *   - state rounds: A's plan refused or OBSOLETE as its variant says, never published,
 *     never applied; the state and the service's record of it are B's apply;
 *   - check rounds: the stale SUCCESS was refused, no check result of A's plan was recorded
 *     after B's plan came, and A's plan was never published.
 *
 *   npm run test:fault -- --rounds 1000 --seed 7 --parallel 8
 *   npm run test:fault -- --rounds 300 --postgres postgres://user:pw@127.0.0.1/postgres --instances 2
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AgentProcess, type AgentStep } from './agent-process.js';
import { CheckerProcess, type CheckerStep } from './checker-process.js';
import {
  ADMIN_TOKEN,
  deploy,
  option,
  seededRandom,
  type ServiceProcess,
  textOption,
} from './service.js';
import {
  applyArtifact,
  planAs,
  prepareWorkspace,
  pullState,
  type PulledState,
  terraformOnPath,
} from './terraform.js';

type Mode = 'MONOTONIC' | 'STRICT';
type PausePoint = 'acquired' | 'built' | 'sending';
type Order = 'B published first' | 'B acquired, not yet written' | 'nobody acquired';

/** A state round's variant: how A submits, and when it is thawed. */
interface StateVariant {
  /** A also submits against the deployment sequence it read before planning (R33). */
  bound: boolean;
  /** Before B's plan's deployment starts, after terraform applied it, or after its report. */
  thaw: 'before the start' | 'after the apply' | 'after the report';
}

/** State rounds play these in turn: every outcome R56 and R57 give within the first five. */
const STATE_VARIANTS: StateVariant[] = [
  { bound: false, thaw: 'after the report' },
  { bound: true, thaw: 'after the report' },
  { bound: false, thaw: 'after the apply' },
  { bound: true, thaw: 'before the start' },
  { bound: false, thaw: 'before the start' },
  { bound: true, thaw: 'after the apply' },
];

/**
 * What R56 and R57 say of A's plan in a state round: refused at submit (for one of
 * `refused`), or stored and turned OBSOLETE by the deployment's start or by its report.
 */
function stateOutcome(
  v: StateVariant,
): { refused: string[] } | { obsoleteBy: 'the start' | 'the report' } {
  if (v.thaw === 'before the start') return { obsoleteBy: v.bound ? 'the start' : 'the report' };
  // A submit against a sequence that moved is refused for it (the state check follows it).
  if (v.bound) return { refused: ['DEPLOYMENT_SEQUENCE', 'STATE_SERIAL'] };
  return v.thaw === 'after the apply'
    ? { obsoleteBy: 'the report' }
    : { refused: ['STATE_SERIAL'] };
}

/** A check round's variant: whether B's plan is published (its scan passes) before the thaw. */
type CheckVariant = 'B published' | 'B proposed';
const CHECK_VARIANTS: CheckVariant[] = ['B published', 'B proposed'];

/** What a state round saw besides A's and B's answers. */
interface StateSeen {
  /** The state A and B planned from, the one the deployer reported, the one at the end. */
  before: PulledState;
  reported: PulledState;
  after: PulledState;
  /** The deployment sequence A read before planning (bound variants). */
  aBasedOn?: number;
  /** Where A's plan was stored: the answers to an approval and to a start of it. */
  approveA?: string;
  startA?: string;
  ms: number;
}

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
  /** Two approvals needed; two reviewers race agent B's fencing write. */
  quorum: boolean;
  /** How long B stays frozen after acquiring, and when each reviewer approves (quorum rounds). */
  raceDelaysMs: { b: number; first: number; second: number };
  /** The reviewers' answers in the race. */
  approvals: { who: string; code: string }[];
  /** Set by the judge: did A's plan get its two approvals before the fence moved? */
  quorumOutcome?: 'published' | 'fenced';
  /** A plans against the deployment sequence; the published plan is deployed while A is frozen. */
  stale: boolean;
  /** A and B wait in the lease queue; A is frozen at its grant. */
  queue: boolean;
  /** The lease tickets of A and B (queue rounds). */
  tickets: { A?: string; B?: string };
  /** A state round (R56, R57): A plans with terraform and is frozen while B's plan is applied. */
  state: StateVariant | null;
  stateSeen?: StateSeen;
  /** A check round (R50): a CHECKER frozen between reading A's plan and reporting on it. */
  check: CheckVariant | null;
  /** The frozen CHECKER's answer, when it was thawed. */
  checker?: CheckerStep;
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
  detail: string | null;
}

export interface PauseReport {
  rounds: number;
  pauses: number;
  violations: string[];
  seed: number;
  /** Quorum rounds, and how A's plan ended in them. */
  quorum: { rounds: number; published: number; fenced: number };
  /** Stale-plan rounds (R33), all of which must end with A's plan unpublished. */
  stale: number;
  /** Queue rounds played. */
  queueRounds: number;
  /** Check rounds (R50): how many, and how many stale SUCCESS reports were refused. */
  check: { rounds: number; refused: number };
  /**
   * State rounds (R56, R57): how many, how A's plan ended (refused at submit, or OBSOLETE),
   * one line each; `skipped` says why none was played.
   */
  state: {
    rounds: number;
    refused: number;
    obsolete: number;
    skipped: string | null;
    lines: string[];
  };
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
  let rounds: Round[] = [];
  const stateSkipped = terraformOnPath() ? null : 'skipped: terraform not on PATH';
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
    const reviewer2 = await service.issueToken('reviewer-2', 'REVIEWER');
    const deployer = await service.issueToken('deployer', 'DEPLOYER');
    const holder = await service.issueToken('holder', 'AGENT');
    const checker = await service.issueToken('checker', 'CHECKER');

    // Every round's choices are drawn up front from the seed: the same seed plays the same rounds.
    rounds = Array.from({ length: options.rounds }, (_, index): Round => {
      const mode: Mode = random(2) ? 'STRICT' : 'MONOTONIC';
      const queue = index % 4 === 3;
      const state =
        index % 4 === 1 ? STATE_VARIANTS[((index - 1) / 4) % STATE_VARIANTS.length] : null;
      const check =
        index % 8 === 6 ? CHECK_VARIANTS[((index - 6) / 8) % CHECK_VARIANTS.length] : null;
      const round: Round = {
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
        quorum: random(4) === 0 && !queue,
        queue,
        tickets: {},
        raceDelaysMs: { b: random(300), first: random(500), second: random(500) },
        approvals: [],
        stale: random(5) === 0 && !queue,
        state,
        check,
      };
      // A state round is only that: B's plan is reviewed, A's is not published by a submit.
      if (state) Object.assign(round, { quorum: false, stale: false, requireApproval: true });
      // So is a check round.
      if (check) Object.assign(round, { quorum: false, stale: false, requireApproval: true });
      return round;
    });

    const watcher = new Watcher(service);
    const watching = watcher.run();

    /** A check round (R50): see the comment at the top. */
    async function playCheck(round: Round, variant: CheckVariant): Promise<void> {
      const a = instances[round.instanceOf.A];
      const b = instances[round.instanceOf.B];
      const env = round.environment;
      await service.ok(
        ADMIN_TOKEN,
        'mutation($e: String!) { updateEnvironmentPolicy(input: { environment: $e, requiredChecks: ["scan"] }) { name } }',
        { e: env },
      );
      const submit = async (
        instance: ServiceProcess,
        token: string,
        who: 'agent-a' | 'agent-b',
      ): Promise<string> => {
        const content = `plan by ${who} in check round ${round.index}`;
        round.contents.set(who, content);
        const { acquireLease } = await instance.ok(
          token,
          'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 30 }) { generation } }',
          { e: env },
        );
        const { submitPlan } = await instance.ok(
          token,
          'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
          {
            input: {
              environment: env,
              generation: acquireLease.generation,
              content,
              idempotencyKey: `${env}-${who}`,
            },
          },
        );
        await instance.ok(
          token,
          'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
          { e: env, g: acquireLease.generation },
        );
        await instance.ok(
          reviewer,
          'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
          {
            id: submitPlan.id,
          },
        );
        return submitPlan.id as string;
      };
      // A's plan is approved and waits for its scan.
      const planA = await submit(a, agentA, 'agent-a');
      round.a = { step: 'result', code: 'OK', planId: planA };
      // The CHECKER reads A's plan and is frozen before it reports.
      const scanner = new CheckerProcess(a.url, checker, planA, 'scan');
      try {
        const read = await scanner.until('read');
        if (read.status !== 'PROPOSED')
          violations.push(`${env}: the checker read A's plan ${planA} as ${read.status}`);
        scanner.freeze();
        pauses++;
        // B's newer plan comes (fencing A's generation) and, in one variant, passes its scan.
        const planB = await submit(b, agentB, 'agent-b');
        round.b = { step: 'result', code: 'OK', planId: planB };
        if (variant === 'B published') {
          await b.ok(
            checker,
            'mutation($id: ID!) { reportCheck(input: { planId: $id, name: "scan", status: SUCCESS }) { status } }',
            { id: planB },
          );
        }
        scanner.thaw();
        scanner.goAhead();
        round.checker = await scanner.until('result');
        await scanner.exited;
      } finally {
        scanner.kill();
      }
    }

    /** A state round (R56, R57): see the comment at the top. */
    async function playState(round: Round, variant: StateVariant): Promise<void> {
      const started = Date.now();
      const b = instances[round.instanceOf.B];
      const dir = mkdtempSync(join(tmpdir(), 'planfence-state-round-'));
      try {
        const before = await prepareWorkspace(dir);
        // A plans from the state as it is, and is frozen before it takes a lease and submits.
        const a = track(
          new AgentProcess(
            instances[round.instanceOf.A].url,
            agentA,
            round.environment,
            30,
            'A',
            STEP_DELAY_MS,
            variant.bound ? 'terraform-bound' : 'terraform',
            'built',
            dir,
          ),
        );
        const built = await a.until('built');
        if (built.step !== 'built') throw new Error(`A did not plan: ${JSON.stringify(built)}`);
        a.freeze();
        pauses++;
        round.contents.set('agent-a', built.content ?? '');
        // Meanwhile B plans from the same state, submits, and lets its lease go.
        const planned = await planAs(dir, 'B');
        round.contents.set('agent-b', planned.content);
        const { acquireLease } = await b.ok(
          agentB,
          'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 30 }) { generation } }',
          { e: round.environment },
        );
        const { submitPlan } = await b.ok(
          agentB,
          'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
          {
            input: {
              environment: round.environment,
              generation: acquireLease.generation,
              content: planned.content,
              contentType: 'TERRAFORM_PLAN_JSON',
              artifact: planned.artifact,
              idempotencyKey: `${round.environment}-b`,
            },
          },
        );
        round.b = { step: 'result', code: 'OK', planId: submitPlan.id };
        await b.ok(
          agentB,
          'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
          { e: round.environment, g: acquireLease.generation },
        );
        // A reviewer approves B's plan: it is published.
        await b.ok(reviewer, 'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }', {
          id: submitPlan.id,
        });
        const resume = async () => {
          a.thaw();
          a.goAhead();
          round.a = await a.result();
          await a.exited;
        };
        if (variant.thaw === 'before the start') await resume();
        // A deployer applies the published plan: the plan file as the service hands it out.
        const { startDeployment } = await b.ok(
          deployer,
          'mutation($e: String!, $p: ID!, $k: String!) { startDeployment(input: { environment: $e, planId: $p, idempotencyKey: $k }) { id plan { artifact } } }',
          { e: round.environment, p: submitPlan.id, k: `${round.environment}-deploy` },
        );
        await applyArtifact(dir, startDeployment.plan.artifact, 'published');
        if (variant.thaw === 'after the apply') await resume();
        const reported = await pullState(dir);
        await b.ok(
          deployer,
          'mutation($id: ID!, $state: TerraformStateInput!) { finishDeployment(input: { deploymentId: $id, outcome: SUCCEEDED, state: $state }) { id } }',
          {
            id: startDeployment.id,
            state: { lineage: reported.lineage, serial: reported.serial },
          },
        );
        if (variant.thaw === 'after the report') await resume();
        // Where A's plan was stored: a reviewer approves it, a deployer deploys it.
        const seen: StateSeen = {
          before,
          reported,
          after: before,
          aBasedOn: built.basedOnDeploymentSequence,
          ms: 0,
        };
        const planId = round.a?.code === 'OK' ? round.a.planId : undefined;
        if (planId) {
          const code = (answer: { errors?: { extensions: Record<string, unknown> }[] }) =>
            (answer.errors?.[0]?.extensions?.code as string | undefined) ?? 'OK';
          seen.approveA = code(
            await b.gql(
              reviewer,
              'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
              { id: planId },
            ),
          );
          seen.startA = code(
            await b.gql(
              deployer,
              'mutation($e: String!, $p: ID!, $k: String!) { startDeployment(input: { environment: $e, planId: $p, idempotencyKey: $k }) { id } }',
              { e: round.environment, p: planId, k: `${round.environment}-deploy-a` },
            ),
          );
        }
        seen.after = await pullState(dir);
        seen.ms = Date.now() - started;
        round.stateSeen = seen;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }

    async function play(round: Round): Promise<void> {
      if (round.state && stateSkipped) return;
      await service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        {
          input: {
            name: round.environment,
            mode: round.mode,
            requireApproval: round.requireApproval || round.quorum,
            ...(round.quorum ? { approvalRules: [{ group: null, count: 2 }] } : {}),
          },
        },
      );
      watcher.active.add(round.environment);
      const agent = (
        token: string,
        who: 'A' | 'B',
        ttl: number,
        queue = false,
        holdAt?: 'acquired',
      ) =>
        track(
          new AgentProcess(
            instances[round.instanceOf[who]].url,
            token,
            round.environment,
            ttl,
            `plan by ${who} in round ${round.index}: ${'x'.repeat(round.index % 50)}`,
            STEP_DELAY_MS,
            queue ? 'queue' : 'acquire',
            holdAt,
          ),
        );

      const approve = async (who: string, token: string, instance: number, planId: string) => {
        const answer = await instances[instance].gql<{ approvePlan: { status: string } }>(
          token,
          'mutation($id: ID!) { approvePlan(input: { planId: $id }) { status } }',
          { id: planId },
        );
        round.approvals.push({
          who,
          code: (answer.errors?.[0]?.extensions?.code as string | undefined) ?? 'OK',
        });
      };

      if (round.state) {
        await playState(round, round.state);
        watcher.active.delete(round.environment);
        return;
      }

      if (round.check) {
        await playCheck(round, round.check);
        watcher.active.delete(round.environment);
        return;
      }

      if (round.stale && !round.quorum) {
        // B publishes a plan (a reviewer approves it where needed) and lets its lease go.
        const b = instances[round.instanceOf.B];
        const content = `plan by B in round ${round.index}`;
        round.contents.set('agent-b', content);
        const { acquireLease } = await b.ok(
          agentB,
          'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 30 }) { generation } }',
          { e: round.environment },
        );
        const { submitPlan } = await b.ok(
          agentB,
          'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
          {
            input: {
              environment: round.environment,
              generation: acquireLease.generation,
              content,
              idempotencyKey: `${round.environment}-b`,
            },
          },
        );
        await b.ok(
          agentB,
          'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
          { e: round.environment, g: acquireLease.generation },
        );
        if (round.requireApproval) {
          await b.ok(
            reviewer,
            'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
            {
              id: submitPlan.id,
            },
          );
        }
        // A plans against the state as it is (deployment sequence 0) and is frozen before sending.
        const a = track(
          new AgentProcess(
            instances[round.instanceOf.A].url,
            agentA,
            round.environment,
            30,
            `plan by A in round ${round.index}`,
            STEP_DELAY_MS,
            'bound',
            'built',
          ),
        );
        round.contents.set('agent-a', a.content);
        // A waits after building until told: it sends nothing before the deployment below.
        await a.until('built');
        a.freeze();
        pauses++;
        // The published plan is deployed meanwhile: the state A planned against is gone.
        const { startDeployment } = await b.ok(
          deployer,
          'mutation($e: String!, $p: ID!, $k: String!) { startDeployment(input: { environment: $e, planId: $p, idempotencyKey: $k }) { id } }',
          { e: round.environment, p: submitPlan.id, k: `${round.environment}-deploy` },
        );
        await b.ok(
          deployer,
          'mutation($id: ID!) { finishDeployment(input: { deploymentId: $id, outcome: SUCCEEDED }) { id } }',
          { id: startDeployment.id },
        );
        a.thaw();
        a.goAhead();
        round.a = await a.result();
        round.b = { step: 'result', code: 'OK', planId: submitPlan.id };
        await a.exited;
        if (round.requireApproval && round.a.code === 'OK' && round.a.planId)
          await approve('reviewer', reviewer, round.instanceOf.A, round.a.planId);
        watcher.active.delete(round.environment);
        return;
      }

      if (round.quorum) {
        const a = agent(agentA, 'A', LEASE_SECONDS);
        round.a = await a.result();
        await a.exited;
        await sleep(LEASE_SECONDS * 1000 + 150); // A's lease expires; its plan waits for two approvals.
        const b = agent(agentB, 'B', 30);
        const race: Promise<unknown>[] = [];
        if (round.a.code === 'OK' && round.a.planId) {
          const planId = round.a.planId;
          race.push(
            sleep(round.raceDelaysMs.first).then(() =>
              approve('reviewer', reviewer, round.instanceOf.A, planId),
            ),
            sleep(round.raceDelaysMs.second).then(() =>
              approve('reviewer-2', reviewer2, round.instanceOf.B, planId),
            ),
          );
        }
        race.push(
          (async () => {
            await b.until('acquired');
            b.freeze();
            pauses++;
            await sleep(round.raceDelaysMs.b);
            b.thaw();
            round.b = await b.result();
          })(),
        );
        await Promise.all(race);
        round.contents.set('agent-a', a.content);
        round.contents.set('agent-b', b.content);
        await b.exited;
        // B's plan needs both reviewers too.
        const open = (
          await service.ok(
            reviewer,
            'query($e: String!) { plans(environment: $e, status: PROPOSED) { id } }',
            { e: round.environment },
          )
        ).plans as { id: string }[];
        for (const { id } of open.reverse()) {
          for (const token of [reviewer, reviewer2]) {
            await service.gql(
              token,
              'mutation($id: ID!) { approvePlan(input: { planId: $id }) { id } }',
              { id },
            );
          }
        }
        watcher.active.delete(round.environment);
        return;
      }

      if (round.queue) {
        // The harness holds the lease while both enqueue, A first.
        const held = (
          await service.ok(
            holder,
            'mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 60 }) { generation } }',
            { e: round.environment },
          )
        ).acquireLease.generation as number;
        // A waits after reading its grant until told, so it sends nothing under a live lease.
        const a = agent(agentA, 'A', LEASE_SECONDS, true, 'acquired');
        round.tickets.A = (await a.until('enqueued')).ticket;
        const b = agent(agentB, 'B', 30, true);
        round.tickets.B = (await b.until('enqueued')).ticket;
        await service.ok(
          holder,
          'mutation($e: String!, $g: Int!) { releaseLease(input: { environment: $e, generation: $g }) }',
          { e: round.environment, g: held },
        );
        // A is frozen the moment it reads its grant; its lease runs out with no traffic.
        await a.until('acquired');
        a.freeze();
        pauses++;
        let stallTimer: NodeJS.Timeout | undefined;
        const stalled = new Promise<null>(
          (resolve) => (stallTimer = setTimeout(() => resolve(null), 20_000)),
        );
        round.b = (await Promise.race([b.result(), stalled])) ?? undefined;
        // Not left running: a pending timer would hold the test process open for its 20 s.
        clearTimeout(stallTimer);
        if (!round.b) violations.push(`${round.environment}: the queue stalled behind paused A`);
        a.thaw();
        a.goAhead();
        round.a = await a.result();
        round.contents.set('agent-a', a.content);
        round.contents.set('agent-b', b.content);
        b.kill();
        await Promise.all([a.exited, b.exited]);
      } else {
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
      }

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
    for (const round of rounds) {
      if (round.state && stateSkipped) continue;
      violations.push(...(await judge(service, round, watcher.pointers)));
    }
  } finally {
    for (const agent of spawned) agent.kill();
    await deployment.stop();
  }
  const quorum = rounds.filter((round) => round.quorum);
  return {
    rounds: options.rounds,
    pauses,
    violations,
    seed: options.seed,
    quorum: {
      rounds: quorum.length,
      published: quorum.filter((round) => round.quorumOutcome === 'published').length,
      fenced: quorum.filter((round) => round.quorumOutcome === 'fenced').length,
    },
    stale: rounds.filter((round) => round.stale && !round.quorum).length,
    queueRounds: rounds.filter((round) => round.queue).length,
    state: stateReport(rounds, stateSkipped),
    check: {
      rounds: rounds.filter((round) => round.check).length,
      refused: rounds.filter((round) => round.check && round.checker && round.checker.code !== 'OK')
        .length,
    },
  };
}

/** The state rounds in the report: counts, and one line per round. */
function stateReport(rounds: Round[], skipped: string | null): PauseReport['state'] {
  const played = rounds.filter((round) => round.state && round.stateSeen);
  const lines = played.map((round) => {
    const { bound, thaw } = round.state!;
    const seen = round.stateSeen!;
    const a = round.a;
    const outcome =
      a?.code === 'OK'
        ? `stored as ${a.planId}, OBSOLETE; approval ${seen.approveA}, start ${seen.startA}`
        : `${a?.code} {reason: ${a?.reason}}, nothing stored`;
    return `${round.environment} (${bound ? 'bound to sequence 0' : 'unbound'}, A thawed ${thaw}): ${outcome}; state serial ${seen.before.serial} -> ${seen.reported.serial}, holds ${seen.after.owner}'s apply (${(seen.ms / 1000).toFixed(1)} s)`;
  });
  return {
    rounds: played.length,
    refused: played.filter((round) => round.a?.code === 'PRECONDITION_FAILED').length,
    obsolete: played.filter((round) => round.a?.code === 'OK').length,
    skipped: rounds.some((round) => round.state) ? skipped : null,
    lines,
  };
}

/** Samples pointers and fences of the environments in play; any step backwards is a violation. */
class Watcher {
  readonly active = new Set<string>();
  readonly violations: string[] = [];
  /** Every plan each environment's pointer was seen at. */
  readonly pointers = new Map<string, Set<string>>();
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
      if (env.currentPlan) {
        const seen = this.pointers.get(env.name) ?? new Set<string>();
        this.pointers.set(env.name, seen.add(env.currentPlan.id));
      }
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

/**
 * Judges one round from the API and the audit log alone (and, in state rounds, the Terraform
 * state it left); `pointers`: every plan the watcher saw each pointer at.
 */
async function judge(
  service: ServiceProcess,
  round: Round,
  pointers: Map<string, Set<string>>,
): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const events = (
    (
      await service.ok(
        ADMIN_TOKEN,
        'query($e: String!) { auditEvents(environment: $e, first: 500) { id at action actor outcome code generation planId detail } }',
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
    // An approval publishes when it completes the rules: its audit detail says so.
    const publishes =
      (event.action === 'APPROVE_PLAN' && (event.detail ?? '').startsWith('published')) ||
      (event.action === 'SUBMIT_PLAN' && !round.requireApproval && !round.quorum);
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
      // A Terraform plan is stored as its JSON, re-serialised with its sensitive values
      // masked (R54); terraform_data here has none.
      const stored = (content: string | undefined) =>
        round.state && content !== undefined ? JSON.stringify(JSON.parse(content)) : content;
      if (
        !plan ||
        plan.content !== stored(sent) ||
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
      problems.push(
        `${env}: agent ${who} got ${step.code}${step.message ? ` (${step.message})` : ''}`,
      );
  }
  if (round.quorum) problems.push(...(await judgeQuorum(service, round, events)));
  if (round.stale && !round.quorum) problems.push(...(await judgeStale(service, round, events)));
  if (round.queue) problems.push(...(await judgeQueue(service, round)));
  if (round.state) problems.push(...(await judgeState(service, round, events, pointers)));
  if (round.check) problems.push(...(await judgeCheck(service, round, events, pointers)));
  const expected =
    (round.stale && !round.quorum) || round.state || round.check
      ? null
      : expectedForA(round, events);
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

/**
 * A quorum round: A's plan needs two approvals; they raced B's fencing write (its grant in
 * STRICT, its first accepted submit in MONOTONIC). Judged from the audit log's order.
 */
async function judgeQuorum(
  service: ServiceProcess,
  round: Round,
  events: AuditEvent[],
): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const planId = round.a?.code === 'OK' ? round.a.planId : undefined;
  if (!planId) return problems;
  const fencing = events.find(
    (e) =>
      e.actor === 'agent-b' &&
      e.outcome === 'ACCEPTED' &&
      e.action === (round.mode === 'STRICT' ? 'ACQUIRE_LEASE' : 'SUBMIT_PLAN'),
  );
  // B's fencing write is always accepted in these rounds; without it there was no race to judge.
  if (!fencing) return [`${env}: agent B never fenced generation ${round.a?.generation}`];
  const fencedAt = Number(fencing.id);
  const approvals = events.filter((e) => e.action === 'APPROVE_PLAN' && e.planId === planId);
  const accepted = approvals.filter((e) => e.outcome === 'ACCEPTED');
  const published = accepted.filter((e) => (e.detail ?? '').startsWith('published'));
  for (const e of approvals) {
    const afterFence = Number(e.id) > fencedAt;
    if (afterFence && e.outcome === 'ACCEPTED')
      problems.push(`${env}: ${e.actor}'s approval of ${planId} accepted after the fence moved`);
    if (afterFence && e.outcome === 'REJECTED' && e.code !== 'STALE_GENERATION')
      problems.push(`${env}: ${e.actor}'s late approval got ${e.code}, not STALE_GENERATION`);
    if (!afterFence && e.outcome === 'REJECTED')
      problems.push(`${env}: ${e.actor}'s approval before the fence moved got ${e.code}`);
  }
  if (published.length > 1) problems.push(`${env}: ${planId} published ${published.length} times`);
  if (published.length === 1 && accepted.indexOf(published[0]) !== 1)
    problems.push(`${env}: ${planId} published by its first approval, with two required`);
  if (accepted.length === 2 && published.length !== 1)
    problems.push(`${env}: two approvals of ${planId} before the fence, and no publication`);
  for (const answer of round.approvals) {
    if (!['OK', 'STALE_GENERATION'].includes(answer.code))
      problems.push(`${env}: ${answer.who} was answered ${answer.code}`);
  }
  const status = (
    await service.ok(ADMIN_TOKEN, 'query($id: ID!) { plan(id: $id) { status } }', { id: planId })
  ).plan.status as string;
  round.quorumOutcome = published.length ? 'published' : 'fenced';
  const expected = published.length ? ['PUBLISHED', 'SUPERSEDED'] : ['OBSOLETE'];
  if (!expected.includes(status))
    problems.push(`${env}: ${planId} reads ${status}, expected ${expected.join(' or ')}`);
  return problems;
}

/**
 * A stale-plan round (R33): A's plan, made against deployment sequence 0, was submitted after
 * deployment 1 started. It is refused at submit, whether or not it would publish, and nothing
 * is stored (R57); the published plan is still B's.
 */
async function judgeStale(
  service: ServiceProcess,
  round: Round,
  events: AuditEvent[],
): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const a = round.a;
  if (!a) return problems;
  if (a.basedOnDeploymentSequence !== undefined && a.basedOnDeploymentSequence !== 0)
    problems.push(`${env}: A planned against sequence ${a.basedOnDeploymentSequence}, not 0`);
  const published = events.filter(
    (e) =>
      e.outcome === 'ACCEPTED' &&
      e.planId != null &&
      e.planId === a.planId &&
      ((e.action === 'APPROVE_PLAN' && (e.detail ?? '').startsWith('published')) ||
        (e.action === 'SUBMIT_PLAN' && !round.requireApproval)),
  );
  if (published.length) problems.push(`${env}: A's stale plan ${a.planId} was published`);
  if (
    a.code !== 'PRECONDITION_FAILED' ||
    a.reason !== 'DEPLOYMENT_SEQUENCE' ||
    a.deploymentSequence !== 1
  )
    problems.push(
      `${env}: A's submit got ${a.code} {reason: ${a.reason}, deploymentSequence: ${a.deploymentSequence}}, not PRECONDITION_FAILED {reason: DEPLOYMENT_SEQUENCE, deploymentSequence: 1}`,
    );
  if (events.some((e) => e.actor === 'agent-a' && e.action === 'SUBMIT_PLAN' && e.planId))
    problems.push(`${env}: A's refused plan was stored`);
  const current = (
    await service.ok(
      ADMIN_TOKEN,
      'query($e: String!) { environment(name: $e) { deploymentSequence currentPlan { id } } }',
      { e: env },
    )
  ).environment as { deploymentSequence: number; currentPlan: { id: string } | null };
  if (current.currentPlan?.id !== round.b?.planId || current.deploymentSequence !== 1)
    problems.push(
      `${env}: the current plan is ${current.currentPlan?.id} at sequence ${current.deploymentSequence}, not B's ${round.b?.planId} at 1`,
    );
  return problems;
}

/**
 * A state round (R56, R57): A's plan, computed from the state before B's apply, ends as its
 * variant says (stateOutcome): refused at submit with its reason and nothing stored, or
 * stored and OBSOLETE from the start or the report on, neither approvable nor deployable.
 * Whatever the variant, it is never published and never applied: terraform applied B's plan
 * once, the service recorded that state and that deployment alone, and the pointer is B's.
 */
async function judgeState(
  service: ServiceProcess,
  round: Round,
  events: AuditEvent[],
  pointers: Map<string, Set<string>>,
): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const { a, stateSeen: seen, state: variant } = round;
  if (!a || !seen || !variant) return [`${env}: the state round did not finish`];
  const { before, reported, after } = seen;

  // What terraform did: B's plan applied once, over the state both planned from.
  if (reported.lineage !== before.lineage || reported.serial <= before.serial)
    problems.push(
      `${env}: the apply left serial ${reported.serial} (${reported.lineage}) after ${before.serial} (${before.lineage})`,
    );
  if (after.owner !== 'B' || after.serial !== reported.serial || after.lineage !== reported.lineage)
    problems.push(
      `${env}: the state holds ${after.owner}'s apply at serial ${after.serial}, not only B's at ${reported.serial}`,
    );
  if (variant.bound && seen.aBasedOn !== 0)
    problems.push(`${env}: A planned against sequence ${seen.aBasedOn}, not 0`);

  // What the service recorded: that state, that one deployment of B's plan, B's plan current.
  const { environment, deployments, plans } = await service.ok<{
    environment: {
      deploymentSequence: number;
      currentPlan: { id: string } | null;
      terraformState: { lineage: string; serial: number } | null;
    };
    deployments: { id: string; status: string; plan: { id: string } }[];
    plans: {
      id: string;
      submittedBy: string;
      status: string;
      priorState: { serial: number } | null;
    }[];
  }>(
    ADMIN_TOKEN,
    `query($e: String!) {
      environment(name: $e) { deploymentSequence currentPlan { id } terraformState { lineage serial } }
      deployments(environment: $e) { id status plan { id } }
      plans(environment: $e) { id submittedBy status priorState { serial } }
    }`,
    { e: env },
  );
  const bPlan = round.b?.planId;
  if (environment.currentPlan?.id !== bPlan || environment.deploymentSequence !== 1)
    problems.push(
      `${env}: the current plan is ${environment.currentPlan?.id} at sequence ${environment.deploymentSequence}, not B's ${bPlan} at 1`,
    );
  if (
    environment.terraformState?.lineage !== reported.lineage ||
    environment.terraformState.serial !== reported.serial
  )
    problems.push(
      `${env}: the service records state ${JSON.stringify(environment.terraformState)}, not the reported serial ${reported.serial}`,
    );
  if (
    deployments.length !== 1 ||
    deployments[0].plan.id !== bPlan ||
    deployments[0].status !== 'SUCCEEDED'
  )
    problems.push(
      `${env}: deployments ${JSON.stringify(deployments)}, not one SUCCEEDED deployment of ${bPlan}`,
    );

  // A's plan: never published, never current.
  const aPlans = plans.filter((plan) => plan.submittedBy === 'agent-a');
  const aIds = new Set(aPlans.map((plan) => plan.id));
  const published = events.filter(
    (e) =>
      e.outcome === 'ACCEPTED' &&
      e.action === 'APPROVE_PLAN' &&
      aIds.has(e.planId ?? '') &&
      (e.detail ?? '').startsWith('published'),
  );
  if (published.length)
    problems.push(`${env}: A's stale plan ${published[0].planId} was published`);
  for (const id of pointers.get(env) ?? [])
    if (aIds.has(id)) problems.push(`${env}: the pointer was seen at A's plan ${id}`);

  // A's plan: refused, or OBSOLETE, as the variant says.
  const expected = stateOutcome(variant);
  const thawed = `${variant.bound ? 'bound' : 'unbound'}, thawed ${variant.thaw}`;
  if ('refused' in expected) {
    if (a.code !== 'PRECONDITION_FAILED' || !expected.refused.includes(a.reason ?? ''))
      problems.push(
        `${env}: A's submit (${thawed}) got ${a.code} {reason: ${a.reason}}, not PRECONDITION_FAILED {reason: ${expected.refused.join(' or ')}}`,
      );
    if (
      a.reason === 'STATE_SERIAL' &&
      (a.priorStateSerial !== before.serial || a.stateSerial !== reported.serial)
    )
      problems.push(
        `${env}: STATE_SERIAL named serials ${a.priorStateSerial} and ${a.stateSerial}, not ${before.serial} and ${reported.serial}`,
      );
    if (aPlans.length)
      problems.push(`${env}: A's refused plan was stored: ${[...aIds].join(', ')}`);
  } else {
    const plan = aPlans.find((p) => p.id === a.planId);
    const obsoleted = events.find(
      (e) => e.action === 'PLAN_OBSOLETE' && e.planId === a.planId && e.outcome === 'ACCEPTED',
    );
    const by = expected.obsoleteBy === 'the start' ? 'started' : 'reported state serial';
    if (a.code !== 'OK' || !plan)
      problems.push(`${env}: A's submit (${thawed}) got ${a.code} {reason: ${a.reason}}, not OK`);
    else if (plan.status !== 'OBSOLETE')
      problems.push(`${env}: A's plan ${plan.id} reads ${plan.status}, not OBSOLETE`);
    else if (!obsoleted || !(obsoleted.detail ?? '').includes(by))
      problems.push(
        `${env}: A's plan ${plan.id} was not made OBSOLETE by ${expected.obsoleteBy} (${obsoleted?.detail ?? 'no PLAN_OBSOLETE event'})`,
      );
    if (plan && plan.priorState?.serial !== before.serial)
      problems.push(
        `${env}: A's plan records prior serial ${plan.priorState?.serial}, not ${before.serial}`,
      );
    if (seen.approveA === 'OK') problems.push(`${env}: A's OBSOLETE plan was approved`);
    if (seen.startA !== 'PRECONDITION_FAILED')
      problems.push(`${env}: a start of A's plan got ${seen.startA}, not PRECONDITION_FAILED`);
  }
  return problems;
}

/**
 * A queue round: the holder's generation, then A's ticket, then B's, one generation each
 * (R37), B granted after A's lease ran out (R39); A's late plan is rejected (its
 * generation is fenced by B's grant in STRICT, by B's accepted write in MONOTONIC).
 */
/**
 * A check round (R50): the CHECKER's SUCCESS, sent after B's newer plan came, was refused
 * (INVALID_PLAN_STATE {status: OBSOLETE}, or STALE_GENERATION below the fence) and recorded
 * nothing; A's plan was never published, never seen as the pointer, and reads OBSOLETE; where
 * B's scan passed, B's plan is the current one.
 */
async function judgeCheck(
  service: ServiceProcess,
  round: Round,
  events: AuditEvent[],
  pointers: Map<string, Set<string>>,
): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const planA = round.a?.planId;
  const planB = round.b?.planId;
  if (!planA || !planB) return [`${env}: the check round did not get both plans`];
  const answer = round.checker;
  const refused =
    (answer?.code === 'INVALID_PLAN_STATE' && answer.status === 'OBSOLETE') ||
    answer?.code === 'STALE_GENERATION';
  if (!refused)
    problems.push(
      `${env}: the stale SUCCESS on ${planA} got ${answer?.code} {status: ${answer?.status}}, not INVALID_PLAN_STATE {status: OBSOLETE} or STALE_GENERATION`,
    );
  if (pointers.get(env)?.has(planA)) problems.push(`${env}: the pointer was seen at A's ${planA}`);
  const publishedA = events.some(
    (e) => e.outcome === 'ACCEPTED' && e.planId === planA && /(^|; )published/.test(e.detail ?? ''),
  );
  if (publishedA) problems.push(`${env}: A's plan ${planA} was published`);
  if (
    events.some(
      (e) => e.action === 'REPORT_CHECK' && e.planId === planA && e.outcome === 'ACCEPTED',
    )
  )
    problems.push(`${env}: a check result of A's plan ${planA} was recorded`);
  const { plan, environment } = await service.ok(
    ADMIN_TOKEN,
    'query($a: ID!, $e: String!) { plan(id: $a) { status checks { name } } environment(name: $e) { currentPlan { id } } }',
    { a: planA, e: env },
  );
  if (plan.status !== 'OBSOLETE')
    problems.push(`${env}: A's plan reads ${plan.status}, not OBSOLETE`);
  if (plan.checks.length) problems.push(`${env}: A's plan holds check results`);
  const expectedCurrent = round.check === 'B published' ? planB : null;
  if ((environment.currentPlan?.id ?? null) !== expectedCurrent)
    problems.push(
      `${env}: the current plan is ${environment.currentPlan?.id ?? 'none'}, not ${expectedCurrent ?? 'none'}`,
    );
  return problems;
}

async function judgeQueue(service: ServiceProcess, round: Round): Promise<string[]> {
  const problems: string[] = [];
  const env = round.environment;
  const read = async (id: string | undefined) =>
    id
      ? ((
          await service.ok(
            ADMIN_TOKEN,
            'query($id: ID!) { leaseTicket(id: $id) { status holder lease { generation } } }',
            { id },
          )
        ).leaseTicket as { status: string; holder: string; lease: { generation: number } | null })
      : null;
  const [a, b] = [await read(round.tickets.A), await read(round.tickets.B)];
  if (a?.status !== 'GRANTED' || a.lease?.generation !== 2)
    problems.push(`${env}: A's ticket reads ${JSON.stringify(a)}, not GRANTED generation 2`);
  if (b?.status !== 'GRANTED' || b.lease?.generation !== 3)
    problems.push(`${env}: B's ticket reads ${JSON.stringify(b)}, not GRANTED generation 3`);
  const last = (
    await service.ok(
      ADMIN_TOKEN,
      'query($e: String!) { environment(name: $e) { lastIssuedGeneration } }',
      {
        e: env,
      },
    )
  ).environment.lastIssuedGeneration as number;
  if (last !== 3) problems.push(`${env}: ${last} generations issued, not 3`);
  if (round.b?.code !== 'OK')
    problems.push(`${env}: B, granted after A's lease ran out, got ${round.b?.code}`);
  if (round.a?.code === 'OK')
    problems.push(`${env}: A's plan under its lapsed generation was accepted`);
  else if (round.a && round.a.code !== 'STALE_GENERATION')
    problems.push(`${env}: A got ${round.a.code}, not STALE_GENERATION`);
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
  for (const line of report.state.lines) console.log(`state round ${line}`);
  if (report.state.skipped) console.log(`state rounds: ${report.state.skipped}`);
  console.log(
    `rounds=${report.rounds} pauses=${report.pauses} violations=${report.violations.filter((v) => !v.includes(' history:')).length} seed=${report.seed} quorum=${JSON.stringify(report.quorum)} stale=${report.stale} queueRounds=${report.queueRounds} state=${JSON.stringify({ rounds: report.state.rounds, refused: report.state.refused, obsolete: report.state.obsolete })} check=${JSON.stringify(report.check)}`,
  );
  process.exitCode = report.violations.length ? 1 : 0;
}
