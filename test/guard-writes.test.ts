/**
 * The guard's writes on their own, on a real SQLite database in memory (no service, no
 * HTTP): each write is handed a decision's transaction and returns its outcome, and what
 * else it decided (its effects) is a list of values, in the order decided, that the decision
 * runner records. The end-to-end suites prove what those effects become (audit rows, outbox
 * events, subscription messages); this file proves what each write decides.
 */
import type { DataSource } from 'typeorm';
import { DecisionTx, type Effect } from '../src/fencing/effects.js';
import { DeploymentWrites } from '../src/fencing/deployment-writes.js';
import { EnvironmentWrites } from '../src/fencing/environment-writes.js';
import { LeaseWrites } from '../src/fencing/lease-writes.js';
import { PlanWrites } from '../src/fencing/plan-writes.js';
import { promotionRefused } from '../src/fencing/preconditions.js';
import { readEnvironment, readPlan } from '../src/fencing/reads.js';
import {
  stateOlder,
  whyApprovalRejected,
  whyNotPublishable,
  whySubmitRejected,
} from '../src/fencing/rejections.js';
import { DeploymentOutcome } from '../src/model/deployment.entity.js';
import { FencingMode, QueueMode } from '../src/model/environment.entity.js';
import type { Plan } from '../src/model/plan.entity.js';
import {
  decideOn,
  migratedDataSource,
  submitRequest,
  type Decided,
  type SubmitRequest,
} from './support/guard-database.js';

const environments = new EnvironmentWrites();
const leases = new LeaseWrites();
const plans = new PlanWrites();
const deployments = new DeploymentWrites();

let dataSource: DataSource;

beforeEach(async () => {
  dataSource = await migratedDataSource('sqlite::memory:');
});

afterEach(async () => {
  await dataSource.destroy();
});

/** One decision: the write in a transaction of its own, committed unless it throws. */
function decide<T>(now: number, write: (tx: DecisionTx) => Promise<T>): Promise<Decided<T>> {
  return decideOn(dataSource, now, write);
}

/** The effects as short names: an outbox event's type, else the effect's kind. */
const named = (effects: Effect[]) =>
  effects.map((effect) =>
    effect.kind === 'outbox'
      ? effect.type
      : effect.kind === 'audit'
        ? `audit:${effect.entry.action}`
        : effect.kind,
  );

/**
 * Creates environment `name` at 1,000 (MONOTONIC), needing `approvals` approvals when it
 * requires approval, its proposals expiring after `proposalTtlSeconds` if given.
 */
async function environment(
  name: string,
  requireApproval: boolean,
  { approvals = 1, proposalTtlSeconds = null as number | null } = {},
) {
  const now = 1_000;
  const created = await decide(now, (tx) =>
    environments.createEnvironment(tx, {
      name,
      mode: FencingMode.MONOTONIC,
      requireApproval,
      approvalRules: requireApproval ? [{ group: null, count: approvals }] : [],
      proposalTtlSeconds,
      now,
    }),
  );
  expect(created.error).toBeNull();
  return created.result!;
}

function lease(name: string, principal: string, now: number) {
  return decide(now, (tx) =>
    leases.grantLease(tx, {
      environment: name,
      principal,
      holder: principal,
      ttlMs: 60_000,
      now,
    }),
  );
}

function submit(
  name: string,
  principal: string,
  generation: number,
  now: number,
  content = 'plan',
  extra: Partial<SubmitRequest> = {},
) {
  return decide(now, (tx) =>
    plans.admitPlan(tx, { ...submitRequest(name, principal, generation, content, extra), now }),
  );
}

/** A decision refused with `code` and `message` that decided nothing. */
function expectRefused(
  outcome: { error: { code?: string } | null; effects: Effect[] },
  code: string,
  message: string,
) {
  expect(outcome.error).toMatchObject({ code, message });
  expect(outcome.effects).toEqual([]);
}

/** `reviewer` approves `planId` at `now` (with a break-glass reason or a reviewed sequence). */
function approve(
  planId: string,
  reviewer: string,
  now: number,
  extra: { breakGlassReason?: string; deploymentSequence?: number } = {},
) {
  return decide(now, (tx) =>
    plans.approvePlan(tx, {
      planId,
      reviewer,
      contentHash: null,
      breakGlassReason: null,
      now,
      ...extra,
    }),
  );
}

/** `principal` asks for a ticket on `name`'s lease at `now`. */
function enqueue(name: string, principal: string, now: number) {
  return decide(now, (tx) =>
    leases.enqueueLease(tx, {
      environment: name,
      principal,
      holder: principal,
      ttlSeconds: 60,
      maxWaitSeconds: 600,
      now,
    }),
  );
}

/** The first deployment of `planId` in `name`: started at `startAt`, SUCCEEDED at `finishAt` (with the state it reports). */
async function deployed(
  name: string,
  planId: string,
  startAt: number,
  finishAt: number,
  state: { lineage: string; serial: number } | null = null,
) {
  const started = await decide(startAt, (tx) =>
    deployments.start(tx, {
      environment: name,
      planId,
      principal: 'deployer',
      heartbeatMs: 600_000,
      now: startAt,
    }),
  );
  expect(started.error).toBeNull();
  const finished = await decide(finishAt, (tx) =>
    deployments.finish(tx, {
      id: `${name}#1`,
      principal: 'deployer',
      outcome: DeploymentOutcome.SUCCEEDED,
      detail: null,
      state,
      now: finishAt,
    }),
  );
  expect(finished.error).toBeNull();
}

test('a submit where no approval is needed publishes: the plan, then plan.submitted, plan.published and its announcement', async () => {
  await environment('dev', false);
  const granted = await lease('dev', 'agent', 2_000);
  expect(granted.result?.generation).toBe(1);
  // A grant decides nothing to announce (no ticket waited, no proposal expired).
  expect(granted.effects).toEqual([]);

  const submitted = await submit('dev', 'agent', 1, 3_000);
  expect(submitted.error).toBeNull();
  expect(submitted.result).toMatchObject({ id: 'dev@1.1', status: 'PUBLISHED' });
  expect(named(submitted.effects)).toEqual(['plan.submitted', 'plan.published', 'planPublished']);
});

test('a submit below the fence is refused with STALE_GENERATION and decides nothing', async () => {
  await environment('dev', false);
  await lease('dev', 'agent-a', 2_000);
  // agent-a's lease lapses; agent-b takes generation 2 and submits, raising the fence to 2.
  await lease('dev', 'agent-b', 70_000);
  expect((await submit('dev', 'agent-b', 2, 71_000)).error).toBeNull();

  const stale = await submit('dev', 'agent-a', 1, 72_000, 'old plan');
  expectRefused(stale, 'STALE_GENERATION', "the plan's generation 1 is below the fence 2");
});

test('a submit made against a deployment sequence that moved on is refused, naming the plan and both sequences (R33)', async () => {
  await environment('dev', false);
  await lease('dev', 'agent', 2_000);
  const moved = await submit('dev', 'agent', 1, 3_000, 'plan', { basedOnDeploymentSequence: 4 });
  expectRefused(
    moved,
    'PRECONDITION_FAILED',
    'the plan was made against deployment sequence 4 of "dev", which has moved on to 0: plan again',
  );
});

test('R56: a submit computed from a Terraform state older than the one applied is refused, naming the plan and both serials', async () => {
  await environment('dev', false);
  await lease('dev', 'agent', 2_000);
  const first = await submit('dev', 'agent', 1, 3_000, 'plan', {
    priorState: { lineage: 'L', serial: 2 },
  });
  expect(first.error).toBeNull();
  await deployed('dev', 'dev@1.1', 4_000, 5_000, { lineage: 'L', serial: 3 });

  const older = await submit('dev', 'agent', 1, 6_000, 'second plan', {
    priorState: { lineage: 'L', serial: 2 },
  });
  expectRefused(
    older,
    'PRECONDITION_FAILED',
    'the plan was computed from Terraform state serial 2, but "dev" has since been applied to serial 3 (lineage L): plan again from the current state',
  );
});

test('a refusal no clause read in the transaction explains (on PostgreSQL, a commit between the statement and the reading) says to try again', async () => {
  await environment('dev', false);
  await lease('dev', 'agent', 2_000);
  // Every clause of this submit holds: were the statement to have refused it, nothing read
  // afterwards could name why.
  const why = await decide(3_000, (tx) =>
    whySubmitRejected(
      tx.manager,
      {
        environment: 'dev',
        principal: 'agent',
        generation: 1,
        basedOnPlanId: null,
        basedOnDeploymentSequence: null,
        priorState: null,
        sourceRevision: null,
        policyVersion: 0,
        now: 3_000,
      },
      true,
      false,
    ),
  );
  expect(why.result).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message: 'the plan may not be published now: try again',
    extensions: { reason: 'PROMOTION' },
  });
});

test('R56: a plan computed from a Terraform state is older only against the same lineage at a higher serial, or from no state once one was applied', () => {
  const env = { name: 'prod', currentPlanId: 'prod@1.1', stateLineage: 'L', stateSerial: 3 };
  // Nothing to compare: no prior state, part of one, or no state applied yet.
  expect(stateOlder(null, env)).toBeNull();
  expect(stateOlder({ lineage: null, serial: 1 }, env)).toBeNull();
  expect(stateOlder({ lineage: 'L', serial: null }, env)).toBeNull();
  expect(stateOlder({ lineage: 'L', serial: 1 }, { ...env, stateSerial: null })).toBeNull();
  // Not older: another lineage, the same serial, a later one.
  expect(stateOlder({ lineage: 'M', serial: 1 }, env)).toBeNull();
  expect(stateOlder({ lineage: 'L', serial: 3 }, env)).toBeNull();
  expect(stateOlder({ lineage: 'L', serial: '4' }, env)).toBeNull();
  // Older.
  expect(stateOlder({ lineage: 'L', serial: '2' }, env)).toEqual({
    message:
      'was computed from Terraform state serial 2, but "prod" has since been applied to serial 3 (lineage L): plan again from the current state',
    extensions: {
      reason: 'STATE_SERIAL',
      currentPlanId: 'prod@1.1',
      priorStateSerial: 2,
      stateSerial: 3,
      lineage: 'L',
    },
  });
  expect(stateOlder({ lineage: '', serial: 0 }, env)?.message).toBe(
    'was computed from no Terraform state, but "prod" has since been applied to serial 3 (lineage L): plan again from the current state',
  );
});

test('an approval that completes the rules publishes; the reviewer cannot approve twice', async () => {
  await environment('prod', true);
  await lease('prod', 'agent', 2_000);
  const proposed = await submit('prod', 'agent', 1, 3_000);
  expect(proposed.result?.status).toBe('PROPOSED');
  expect(named(proposed.effects)).toEqual(['plan.submitted']);

  const approved = await approve('prod@1.1', 'alice', 4_000);
  expect(approved.result?.status).toBe('PUBLISHED');
  expect(named(approved.effects)).toEqual(['plan.published', 'planPublished']);

  const again = await approve('prod@1.1', 'alice', 5_000);
  expect(again.error?.code).toBe('INVALID_PLAN_STATE');
  expect(again.effects).toEqual([]);
});

test('drift moves the deployment sequence: proposals made before it turn OBSOLETE, each audited, then environment.drifted', async () => {
  await environment('prod', true);
  await lease('prod', 'agent', 2_000);
  const proposed = await submit('prod', 'agent', 1, 3_000, 'plan', {
    basedOnDeploymentSequence: 0,
  });
  expect(proposed.result?.status).toBe('PROPOSED');

  const drifted = await decide(4_000, (tx) =>
    deployments.reportDrift(tx, {
      environment: 'prod',
      detail: 'a change made by hand',
      reporter: 'checker',
      now: 4_000,
    }),
  );
  expect(drifted.result?.deploymentSequence).toBe(1);
  expect(named(drifted.effects)).toEqual(['audit:PLAN_OBSOLETE', 'environment.drifted']);

  const unknown = await decide(5_000, (tx) =>
    deployments.reportDrift(tx, {
      environment: 'nowhere',
      detail: 'x',
      reporter: 'checker',
      now: 5_000,
    }),
  );
  expect(unknown.error?.code).toBe('NOT_FOUND');
  expect(unknown.effects).toEqual([]);
});

test('a freeze decides environment.frozen, an unfreeze environment.unfrozen; an unknown environment is NOT_FOUND to either and decides nothing', async () => {
  await environment('prod', true);
  const frozen = await decide(2_000, (tx) =>
    environments.freeze(tx, {
      environment: 'prod',
      reason: 'incident',
      actor: 'admin',
      now: 2_000,
    }),
  );
  expect(frozen.result?.frozenReason).toBe('incident');
  expect(named(frozen.effects)).toEqual(['environment.frozen']);

  const missing = await decide(3_000, (tx) =>
    environments.freeze(tx, { environment: 'nowhere', reason: 'x', actor: 'admin', now: 3_000 }),
  );
  expect(missing.error?.code).toBe('NOT_FOUND');
  expect(missing.effects).toEqual([]);

  const unfrozen = await decide(4_000, (tx) =>
    environments.unfreeze(tx, { environment: 'prod', actor: 'admin', now: 4_000 }),
  );
  expect(unfrozen.result?.frozenReason).toBeNull();
  expect(named(unfrozen.effects)).toEqual(['environment.unfrozen']);

  const notThere = await decide(5_000, (tx) =>
    environments.unfreeze(tx, { environment: 'nowhere', actor: 'admin', now: 5_000 }),
  );
  expect(notThere.error?.code).toBe('NOT_FOUND');
  expect(notThere.effects).toEqual([]);
});

test('a refusal names the promotion it demands by the same rule the statement decides by: the soak ends at its very minute (R51)', async () => {
  // staging publishes rev1, deploys it, and the deployment succeeds at 5,000.
  await environment('staging', false);
  await lease('staging', 'agent', 2_000);
  expect(
    (await submit('staging', 'agent', 1, 3_000, 'plan', { sourceRevision: 'rev1' })).error,
  ).toBeNull();
  await deployed('staging', 'staging@1.1', 4_000, 5_000);
  await environment('prod', true);
  const refusal = async (environment: string, revision: string, now: number) =>
    (
      await decide(now, (tx) =>
        promotionRefused(tx.manager, environment, revision, now, 'the plan'),
      )
    ).result;

  // Without a promotion there is nothing to name.
  expect(await refusal('prod', 'rev1', 6_000)).toBeNull();

  const policy = await decide(6_000, (tx) =>
    environments.updatePolicy(tx, {
      environment: 'prod',
      promotion: { from: 'staging', soakMinutes: 10 },
      now: 6_000,
    }),
  );
  expect(policy.error).toBeNull();
  const soakEnds = 5_000 + 10 * 60_000;
  expect(await refusal('prod', 'rev1', soakEnds - 1)).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message: expect.stringContaining('soaks until') as unknown,
  });
  expect(await refusal('prod', 'rev1', soakEnds)).toBeNull();
  expect(await refusal('prod', 'rev1', soakEnds + 60_000)).toBeNull();
  expect(await refusal('prod', 'rev2', soakEnds)).toMatchObject({
    message: expect.stringContaining('is of revision rev1, not rev2') as unknown,
  });
});

test('an approval the statement refused is named clause by clause: frozen unless break-glass, then the pointer, the deployment sequence, the Terraform state, else try again', async () => {
  await environment('prod', true);
  await lease('prod', 'agent', 2_000);
  expect((await submit('prod', 'agent', 1, 3_000)).result?.status).toBe('PROPOSED');
  const freeze = await decide(4_000, (tx) =>
    environments.freeze(tx, {
      environment: 'prod',
      reason: 'incident',
      actor: 'admin',
      now: 4_000,
    }),
  );
  expect(freeze.error).toBeNull();

  // The proposal as it is, with `changes`, in prod as it is: what publishing it now would meet.
  const why = async (changes: Partial<Plan>, breakGlass: boolean) =>
    (
      await decide(5_000, async (tx) => {
        const plan = { ...(await readPlan(tx.manager, 'prod@1.1')), ...changes };
        const env = {
          ...(await readEnvironment(tx.manager, 'prod')),
          currentPlanId: 'prod@1.0',
          deploymentSequence: 2,
          stateLineage: 'L',
          stateSerial: 3,
        };
        return whyNotPublishable(tx.manager, plan, env, breakGlass, 5_000);
      })
    ).result;

  expect(await why({}, false)).toMatchObject({
    code: 'FROZEN',
    extensions: { reason: 'incident', frozenBy: 'admin' },
  });
  expect(await why({ basedOnPlanId: 'prod@0.9' }, true)).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message: 'plan prod@1.1 was based on prod@0.9, which is no longer current',
    extensions: { reason: 'CURRENT_PLAN', currentPlanId: 'prod@1.0' },
  });
  expect(
    await why({ basedOnPlanId: 'prod@1.0', basedOnDeploymentSequence: 1 }, true),
  ).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message:
      'plan prod@1.1 was made against deployment sequence 1 of "prod", which has moved on to 2: plan again',
    extensions: { reason: 'DEPLOYMENT_SEQUENCE', deploymentSequence: 2 },
  });
  expect(
    await why({ basedOnDeploymentSequence: 2, priorStateLineage: 'L', priorStateSerial: 2 }, true),
  ).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message:
      'plan prod@1.1 was computed from Terraform state serial 2, but "prod" has since been applied to serial 3 (lineage L): plan again from the current state',
    extensions: { reason: 'STATE_SERIAL', priorStateSerial: 2, stateSerial: 3 },
  });
  const holds = { basedOnDeploymentSequence: 2, priorStateLineage: 'L', priorStateSerial: 3 };
  expect(await why(holds, true)).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message: 'the plan may not be published now: try again',
    extensions: { reason: 'PROMOTION' },
  });

  // The approval's own naming passes break-glass on: a break-glass approval is not told FROZEN.
  const approval = (breakGlassReason: string | null) =>
    decide(6_000, async (tx) =>
      whyApprovalRejected(tx.manager, await readPlan(tx.manager, 'prod@1.1'), {
        reviewer: 'alice',
        contentHash: null,
        breakGlassReason,
        now: 6_000,
      }),
    );
  expect((await approval(null)).result).toMatchObject({ code: 'FROZEN' });
  expect((await approval('outage')).result).toMatchObject({
    code: 'PRECONDITION_FAILED',
    extensions: { reason: 'PROMOTION' },
  });
});

test('an approval made against the deployment sequence it was reviewed at is refused for what else it meets, not for the sequence (R47)', async () => {
  const created = await environment('prod', true, { approvals: 2 });
  await lease('prod', 'agent', 2_000);
  await submit('prod', 'agent', 1, 3_000);
  const sequence = created.deploymentSequence;
  const reviewed = (deploymentSequence: number, now: number) =>
    approve('prod@1.1', 'alice', now, { deploymentSequence });
  expect((await reviewed(sequence, 4_000)).result?.status).toBe('PROPOSED');
  expectRefused(
    await reviewed(sequence, 5_000),
    'ALREADY_APPROVED',
    'alice has already approved prod@1.1',
  );
  expect((await reviewed(sequence + 1, 6_000)).error).toMatchObject({
    code: 'PRECONDITION_FAILED',
    extensions: { reason: 'DEPLOYMENT_SEQUENCE', deploymentSequence: sequence },
  });
});

test('a waiting ticket is cancelled once, deciding leaseTicketChanged; cancelling it again changes nothing and an unknown ticket is NOT_FOUND', async () => {
  await environment('prod', false);
  await lease('prod', 'agent', 2_000);
  const enqueued = await enqueue('prod', 'other', 3_000);
  expect(enqueued.result?.status).toBe('WAITING');
  const id = enqueued.result!.id;
  const cancel = (ticket: number, now: number) =>
    decide(now, (tx) => leases.cancelLeaseTicket(tx, { id: ticket, now }));

  const cancelled = await cancel(id, 4_000);
  expect(cancelled.result?.status).toBe('CANCELLED');
  expect(cancelled.effects).toEqual([{ kind: 'leaseTicketChanged', id }]);

  const again = await cancel(id, 5_000);
  expect(again.result).toMatchObject({ status: 'CANCELLED', endedAt: cancelled.result!.endedAt });
  expect(again.effects).toEqual([]);

  expectRefused(
    await cancel(id + 100, 6_000),
    'NOT_FOUND',
    `lease ticket ${id + 100} does not exist`,
  );
});

test('a LATEST ticket supersedes every waiting ticket, each announced in the order they were enqueued', async () => {
  await environment('prod', false);
  await lease('prod', 'agent', 2_000);
  // Three wait in FIFO order; then the queue turns LATEST.
  const waiting: number[] = [];
  for (const [i, principal] of ['a', 'b', 'c'].entries())
    waiting.push((await enqueue('prod', principal, 3_000 + i)).result!.id);
  const switched = await decide(4_000, (tx) =>
    environments.updatePolicy(tx, { environment: 'prod', queueMode: QueueMode.LATEST, now: 4_000 }),
  );
  expect(switched.error).toBeNull();

  const latest = await enqueue('prod', 'd', 5_000);
  expect(latest.result?.status).toBe('WAITING');
  const superseded = latest.effects.flatMap((effect) =>
    effect.kind === 'outbox' && effect.type === 'lease.superseded'
      ? [(effect as { ticket: { id: number } }).ticket.id]
      : [],
  );
  expect(superseded).toEqual(waiting);
});

test('R57: a deployment that starts, and the state it reports, turn the proposals they make stale OBSOLETE, each audited by planfence in the order submitted, saying why', async () => {
  await environment('prod', true);
  await lease('prod', 'agent', 2_000);
  await submit('prod', 'agent', 1, 3_000, 'deployed');
  const approved = await approve('prod@1.1', 'alice', 3_500);
  expect(approved.result?.status).toBe('PUBLISHED');
  // Ten proposals made against deployment sequence 0 (prod@1.2 to prod@1.11: in the order
  // submitted, not the ids' text order), two from Terraform state serial 2.
  for (let i = 0; i < 10; i++)
    await submit('prod', 'agent', 1, 4_000, `made at 0, ${i}`, { basedOnDeploymentSequence: 0 });
  for (const content of ['d', 'e'])
    await submit('prod', 'agent', 1, 4_000, content, { priorState: { lineage: 'L', serial: 2 } });

  const audited = (effects: Effect[]) =>
    effects.flatMap((effect) => (effect.kind === 'audit' ? [effect.entry] : []));
  const obsolete = (planId: string, why: string) => ({
    environment: 'prod',
    actor: 'planfence',
    action: 'PLAN_OBSOLETE',
    planId,
    outcome: 'ACCEPTED',
    detail: `${planId} is OBSOLETE: ${why}`,
  });

  const started = await decide(5_000, (tx) =>
    deployments.start(tx, {
      environment: 'prod',
      planId: 'prod@1.1',
      principal: 'deployer',
      heartbeatMs: 600_000,
      now: 5_000,
    }),
  );
  const moved =
    'deployment prod#1 started: the plan was made against an earlier deployment sequence';
  expect(audited(started.effects)).toEqual(
    Array.from({ length: 10 }, (_, i) => obsolete(`prod@1.${i + 2}`, moved)),
  );

  const finished = await decide(6_000, (tx) =>
    deployments.finish(tx, {
      id: 'prod#1',
      principal: 'deployer',
      outcome: DeploymentOutcome.SUCCEEDED,
      detail: null,
      state: { lineage: 'L', serial: 3 },
      now: 6_000,
    }),
  );
  const older =
    'deployment prod#1 reported state serial 3: the plan was computed from an older state';
  expect(audited(finished.effects)).toEqual(
    ['prod@1.12', 'prod@1.13'].map((id) => obsolete(id, older)),
  );
});

test('R16: proposals whose time has come turn EXPIRED, announced in the order submitted', async () => {
  await environment('prod', true, { proposalTtlSeconds: 60 });
  await lease('prod', 'agent', 2_000);
  // prod@1.1 to prod@1.11: prod@1.10 and prod@1.11 come last, not after prod@1.1.
  for (let i = 1; i <= 11; i++) await submit('prod', 'agent', 1, 3_000, `proposal ${i}`);
  const expired = await decide(63_000, (tx) => plans.expireProposals(tx, 63_000));
  expect(expired.result).toBe(11);
  expect(
    expired.effects.map((effect) =>
      effect.kind === 'outbox'
        ? `${effect.type} ${(effect as { plan: Plan }).plan.id}`
        : effect.kind,
    ),
  ).toEqual(Array.from({ length: 11 }, (_, i) => `plan.expired prod@1.${i + 1}`));
});

test('R52: a start is refused for the deploy window only once it has passed: at its very millisecond a start is named for what else it meets', async () => {
  await environment('dev', false);
  const window = await decide(1_500, (tx) =>
    environments.updatePolicy(tx, { environment: 'dev', deployWithinMinutes: 10, now: 1_500 }),
  );
  expect(window.error).toBeNull();
  await lease('dev', 'agent', 2_000);
  expect((await submit('dev', 'agent', 1, 3_000)).result?.status).toBe('PUBLISHED');
  const start = (now: number) =>
    decide(now, (tx) =>
      deployments.start(tx, {
        environment: 'dev',
        planId: 'dev@1.1',
        principal: 'deployer',
        heartbeatMs: 600_000,
        now,
      }),
    );
  expect((await start(4_000)).error).toBeNull();
  // Published at 3,000 with a 10-minute window: it had to start deploying by 603,000.
  expect((await start(603_000)).error).toMatchObject({ code: 'DEPLOYMENT_ACTIVE' });
  expect((await start(603_001)).error).toMatchObject({
    code: 'PRECONDITION_FAILED',
    message:
      'plan dev@1.1 was published more than 10 minutes ago and had to start deploying by 1970-01-01T00:10:03.000Z: plan again',
    extensions: { reason: 'DEPLOY_WINDOW', deployBy: '1970-01-01T00:10:03.000Z' },
  });
});

test('a publishing submit based on the current plan, against a deployment sequence that moved on, is refused for the sequence, not the pointer (R7, R33)', async () => {
  await environment('dev', false);
  await lease('dev', 'agent', 2_000);
  expect((await submit('dev', 'agent', 1, 3_000)).result?.status).toBe('PUBLISHED');
  expectRefused(
    await submit('dev', 'agent', 1, 4_000, 'next', {
      basedOnPlanId: 'dev@1.1',
      basedOnDeploymentSequence: 4,
    }),
    'PRECONDITION_FAILED',
    'the plan was made against deployment sequence 4 of "dev", which has moved on to 0: plan again',
  );
  expectRefused(
    await submit('dev', 'agent', 1, 5_000, 'next', { basedOnPlanId: 'dev@0.9' }),
    'PRECONDITION_FAILED',
    'the current plan is no longer dev@0.9',
  );
});

test('R50: check reports are announced each; the one that completes the checks publishes, announced too; a break-glass approval names every check it skipped', async () => {
  const checks = async (name: string, requireApproval: boolean) => {
    await environment(name, requireApproval);
    const set = await decide(1_500, (tx) =>
      environments.updatePolicy(tx, {
        environment: name,
        requiredChecks: ['lint', 'test'],
        now: 1_500,
      }),
    );
    expect(set.error).toBeNull();
    await lease(name, 'agent', 2_000);
    const policy = { version: set.result!.policyVersion, results: [], denial: null, rules: [] };
    expect((await submit(name, 'agent', 1, 3_000, 'plan', { policy })).result?.status).toBe(
      'PROPOSED',
    );
  };
  const report = (name: string, now: number) =>
    decide(now, (tx) =>
      plans.reportCheck(tx, {
        planId: 'dev@1.1',
        name,
        status: 'SUCCESS',
        summary: null,
        detailsUrl: null,
        reporter: 'ci',
        now,
      }),
    );

  await checks('dev', false);
  const lint = await report('lint', 4_000);
  expect(lint.result?.status).toBe('PROPOSED');
  expect(named(lint.effects)).toEqual(['check.reported']);
  const test = await report('test', 5_000);
  expect(test.result?.status).toBe('PUBLISHED');
  expect(named(test.effects)).toEqual(['check.reported', 'plan.published', 'planPublished']);

  await checks('prod', true);
  const breakGlass = await approve('prod@1.1', 'alice', 6_000, { breakGlassReason: 'outage' });
  expect(breakGlass.result?.status).toBe('PUBLISHED');
  expect(breakGlass.effects).toContainEqual(
    expect.objectContaining({
      kind: 'audit',
      entry: expect.objectContaining({
        action: 'CHECKS_SKIPPED',
        detail: 'published by break-glass (outage) without the required checks lint, test',
      }),
    }),
  );
});

test('PostgreSQL decides a submit in one statement only when its policies deny nothing and add no rules, and it is bound to no deployment sequence or Terraform state', () => {
  const plain = {
    policy: { version: 0, results: [], denial: null, rules: [] },
    basedOnDeploymentSequence: null,
    priorState: null,
  };
  expect(plans.decidesInOneStatement(plain)).toBe(true);
  expect(
    plans.decidesInOneStatement({
      ...plain,
      policy: { ...plain.policy, denial: { policy: 'no-destroy', message: 'no' } },
    }),
  ).toBe(false);
  expect(
    plans.decidesInOneStatement({
      ...plain,
      policy: { ...plain.policy, rules: [{ group: 'dba', count: 1 }] },
    }),
  ).toBe(false);
  expect(plans.decidesInOneStatement({ ...plain, basedOnDeploymentSequence: 0 })).toBe(false);
  expect(plans.decidesInOneStatement({ ...plain, priorState: { lineage: 'L', serial: 1 } })).toBe(
    false,
  );
});
