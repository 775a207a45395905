import type { EntityManager } from 'typeorm';
import type { ErrorDetails } from '../common/errors.js';
import { select } from '../database/database.js';
import { findOne } from '../database/rows.js';
import { type Environment, FencingMode } from '../model/environment.entity.js';
import { LeaseGrant } from '../model/lease-grant.entity.js';
import { type Plan, PlanStatus } from '../model/plan.entity.js';
import { FenceError, PolicyVersionChanged } from './fence.errors.js';
import { liveLease, readEnvironment, readPlan } from './reads.js';
import { LAST_GENERATION } from './sql.js';
import { promotionRefused } from './preconditions.js';

/*
 * The rejections of the guard's decisions (docs/design.md §3, §6, §9). A decision's
 * statement affected nothing; these read the rows, after it, only to name why.
 */

/** R4: a generation never issued, or issued to someone else, is not a token the caller holds. */
export async function unknownGeneration(
  m: EntityManager,
  p: { environment: string; principal: string; generation: number },
): Promise<FenceError | null> {
  const grant = await findOne(m, LeaseGrant, {
    environment: p.environment,
    generation: p.generation,
  });
  if (grant && grant.principal === p.principal) return null;
  return new FenceError(
    'UNKNOWN_GENERATION',
    `generation ${p.generation} of environment "${p.environment}" was not issued to ${p.principal}`,
  );
}

/** R1: the environment has issued its last generation, so no lease can be granted on it. */
export function generationsExhausted(env: Environment): FenceError | null {
  if (env.lastIssuedGeneration < LAST_GENERATION) return null;
  return new FenceError(
    'GENERATIONS_EXHAUSTED',
    `environment "${env.name}" has issued its last generation (${env.lastIssuedGeneration}): no lease can be granted on it; work on a new environment`,
    { lastIssuedGeneration: env.lastIssuedGeneration },
  );
}

/**
 * R38: a grant refused: the environment has no generation left, another holder's lease is
 * live, or lease tickets wait (the queue is handed a free lease first). `asking` is the grant's
 * principal and holder: the same principal under another instance label is told so.
 */
export async function leaseHeld(
  m: EntityManager,
  env: Environment,
  now: number,
  asking: { principal: string; holder: string },
): Promise<FenceError> {
  const exhausted = generationsExhausted(env);
  if (exhausted) return exhausted;
  // A refused grant means another holder's lease is live at this instant: the queue is handed
  // a free lease before the grant's statement runs.
  const lease = liveLease(env, now)!;
  const [row] = await select<{ n: number | string }>(
    m,
    `SELECT COUNT(*) AS n FROM lease_tickets
     WHERE environment = :environment AND status = 'WAITING' AND expires_at > :now`,
    { environment: env.name, now },
  );
  const queueLength = Number(row.n);
  // The same principal under another instance label is another holder: the holder is principal/instance.
  const samePrincipal =
    env.leasePrincipal === asking.principal && lease.holder !== asking.holder
      ? `; the instance label is part of the holder's identity, so ${asking.holder} is not ${lease.holder}: ask with the same instance label as the lease was taken with, or wait until it is released or expires`
      : '';
  return new FenceError(
    'LEASE_HELD',
    `environment "${env.name}" is leased to ${lease.holder}${queueLength ? ` and ${queueLength} lease tickets wait` : ''}${samePrincipal}`,
    {
      holder: lease.holder,
      expiresAt: lease.expiresAt.toISOString(),
      ...(queueLength ? { queueLength } : {}),
    },
  );
}

export async function leaseNotHeld(
  m: EntityManager,
  p: { environment: string; principal: string; generation: number },
): Promise<FenceError> {
  await readEnvironment(m, p.environment);
  return (
    (await unknownGeneration(m, p)) ??
    new FenceError(
      'LEASE_NOT_HELD',
      `the lease of generation ${p.generation} on "${p.environment}" has expired, was released or was superseded`,
    )
  );
}

export function stale(generation: number, fence: number, what: string): FenceError {
  return new FenceError(
    'STALE_GENERATION',
    `${what} generation ${generation} is below the fence ${fence}`,
    { generation, fence },
  );
}

/** R7: the pointer is no longer the plan the caller based its plan on. */
export function preconditionFailed(message: string, env: Environment): FenceError {
  return new FenceError('PRECONDITION_FAILED', message, {
    reason: 'CURRENT_PLAN',
    currentPlanId: env.currentPlanId,
  });
}

/** R33: a deployment started after the plan was made; it describes a state that is gone. */
export function sequenceMoved(what: string, basedOn: number, env: Environment): FenceError {
  return new FenceError(
    'PRECONDITION_FAILED',
    `${what} was made against deployment sequence ${basedOn} of "${env.name}", which has moved on to ${env.deploymentSequence}: plan again`,
    {
      reason: 'DEPLOYMENT_SEQUENCE',
      currentPlanId: env.currentPlanId,
      deploymentSequence: env.deploymentSequence,
    },
  );
}

/**
 * R56: why a plan computed from Terraform state `prior` may not be published or applied in
 * `env` (its state of the same lineage was reported at a higher serial), or null when it may.
 * The message follows the plan's name.
 */
export function stateOlder(
  prior: { lineage: string | null; serial: number | string | null } | null,
  env: Pick<Environment, 'name' | 'currentPlanId' | 'stateLineage' | 'stateSerial'>,
): { message: string; extensions: ErrorDetails } | null {
  if (prior?.lineage == null || prior.serial == null || env.stateSerial == null) return null;
  const serial = Number(prior.serial);
  const noState = prior.lineage === '';
  if (!noState && (prior.lineage !== env.stateLineage || serial >= env.stateSerial)) return null;
  return {
    message: noState
      ? `was computed from no Terraform state, but "${env.name}" has since been applied to serial ${env.stateSerial} (lineage ${env.stateLineage}): plan again from the current state`
      : `was computed from Terraform state serial ${serial}, but "${env.name}" has since been applied to serial ${env.stateSerial} (lineage ${prior.lineage}): plan again from the current state`,
    extensions: {
      reason: 'STATE_SERIAL',
      currentPlanId: env.currentPlanId,
      priorStateSerial: serial,
      stateSerial: env.stateSerial,
      lineage: env.stateLineage,
    },
  };
}

/** R56 as a FenceError of `what` (the plan), or null. */
function stateMoved(
  what: string,
  prior: { lineage: string | null; serial: number | null } | null,
  env: Environment,
): FenceError | null {
  const older = stateOlder(prior, env);
  return older
    ? new FenceError('PRECONDITION_FAILED', `${what} ${older.message}`, older.extensions)
    : null;
}

export async function whySubmitRejected(
  m: EntityManager,
  p: {
    environment: string;
    principal: string;
    generation: number;
    basedOnPlanId: string | null;
    basedOnDeploymentSequence: number | null;
    priorState: { lineage: string; serial: number } | null;
    sourceRevision: string | null;
    policyVersion: number;
    now: number;
  },
  publish: boolean,
  casOnPointer: boolean,
): Promise<Error> {
  const env = await readEnvironment(m, p.environment);
  if (env.policyVersion !== p.policyVersion) return new PolicyVersionChanged(env.name);
  const unknown = await unknownGeneration(m, p);
  if (unknown) return unknown;
  if (p.generation < env.fence) return stale(p.generation, env.fence, "the plan's");
  // The generation was issued to the caller (checked above): a live lease of that generation is the caller's.
  const holdsLiveLease = liveLease(env, p.now)?.generation === p.generation;
  if (env.mode === FencingMode.STRICT && !holdsLiveLease) {
    return new FenceError(
      'LEASE_NOT_HELD',
      `STRICT environment "${env.name}" accepts generation ${p.generation} only under its live lease`,
    );
  }
  if (publish && env.frozenAt) return frozen(env);
  if (casOnPointer && env.currentPlanId !== p.basedOnPlanId) {
    return preconditionFailed(`the current plan is no longer ${p.basedOnPlanId}`, env);
  }
  if (p.basedOnDeploymentSequence != null && p.basedOnDeploymentSequence !== env.deploymentSequence)
    return sequenceMoved(`the plan`, p.basedOnDeploymentSequence, env);
  const older = stateMoved('the plan', p.priorState, env);
  if (older) return older;
  // The one clause of the admission statement left: the promotion a publishing submit demands (R51).
  return orPromotion(
    publish ? await promotionRefused(m, env.name, p.sourceRevision, p.now, 'the plan') : null,
  );
}

/** A clause left unnamed: the statement's decision stands, said as the promotion it demanded. */
function orPromotion(refusal: FenceError | null): FenceError {
  return (
    refusal ??
    new FenceError('PRECONDITION_FAILED', 'the plan may not be published now: try again', {
      reason: 'PROMOTION',
    })
  );
}

export function frozen(env: Environment): FenceError {
  return new FenceError(
    'FROZEN',
    `environment "${env.name}" is frozen by ${env.frozenBy}: ${env.frozenReason}`,
    { reason: env.frozenReason, frozenBy: env.frozenBy },
  );
}

/** Names the rejection of an approval whose row was not inserted, in the order docs/design.md §3/§9 give. */
export async function whyApprovalRejected(
  m: EntityManager,
  submitted: Plan,
  p: {
    reviewer: string;
    contentHash: string | null;
    breakGlassReason: string | null;
    deploymentSequence?: number | null;
    now: number;
  },
): Promise<Error> {
  const env = await readEnvironment(m, submitted.environment);
  // Re-read: expiry may have been materialised in this transaction.
  const plan = await readPlan(m, submitted.id);
  if (plan.submittedBy === p.reviewer) {
    return new FenceError(
      'SELF_APPROVAL',
      `${p.reviewer} submitted ${plan.id} and cannot also approve it`,
    );
  }
  if (p.contentHash != null && p.contentHash !== plan.contentHash) {
    return new FenceError(
      'PRECONDITION_FAILED',
      `plan ${plan.id} has content sha256 ${plan.contentHash}, not the reviewed ${p.contentHash}: read the plan again (planfence plan show ${plan.id}) and approve its hash`,
      {
        reason: 'CONTENT_HASH',
        currentPlanId: env.currentPlanId,
        expectedContentHash: plan.contentHash,
        reviewedContentHash: p.contentHash,
      },
    );
  }
  if (p.deploymentSequence != null && p.deploymentSequence !== env.deploymentSequence) {
    return new FenceError(
      'PRECONDITION_FAILED',
      `plan ${plan.id} was reviewed against deployment sequence ${p.deploymentSequence} of "${env.name}", which has moved on to ${env.deploymentSequence}: look at the plan again`,
      {
        reason: 'DEPLOYMENT_SEQUENCE',
        currentPlanId: env.currentPlanId,
        deploymentSequence: env.deploymentSequence,
      },
    );
  }
  if (plan.generation < env.fence) return stale(plan.generation, env.fence, `plan ${plan.id}'s`);
  if (plan.status !== PlanStatus.PROPOSED) {
    return new FenceError('INVALID_PLAN_STATE', `plan ${plan.id} is ${plan.status}, not PROPOSED`, {
      status: plan.status,
    });
  }
  if (plan.purgedAt != null) {
    return new FenceError(
      'INVALID_PLAN_STATE',
      `plan ${plan.id} waited past the retention period and its content was purged; submit it again`,
      { status: plan.status },
    );
  }
  const mine = await select(
    m,
    'SELECT 1 AS found FROM approvals WHERE plan_id = :id AND approver = :reviewer',
    { id: plan.id, reviewer: p.reviewer },
  );
  if (mine.length) {
    return new FenceError('ALREADY_APPROVED', `${p.reviewer} has already approved ${plan.id}`);
  }
  // A PROPOSED plan older than the current one was marked OBSOLETE in the transaction that
  // moved the pointer past it (R8), so the status check above names that case.
  // What is left of the approval statement: this approval would complete the rules (or is
  // break-glass), so publication must be possible now.
  return whyNotPublishable(m, plan, env, p.breakGlassReason != null, p.now);
}

/**
 * Why plan `plan`, whose step would complete what its publication needs (or is a
 * break-glass approval), cannot be published in `env` now: FROZEN, R7's, R33's, R56's or
 * R51's PRECONDITION_FAILED, in that order.
 */
export async function whyNotPublishable(
  m: EntityManager,
  plan: Plan,
  env: Environment,
  breakGlass: boolean,
  now: number,
): Promise<Error> {
  if (!breakGlass && env.frozenAt) return frozen(env);
  if (plan.basedOnPlanId != null && env.currentPlanId !== plan.basedOnPlanId) {
    return preconditionFailed(
      `plan ${plan.id} was based on ${plan.basedOnPlanId}, which is no longer current`,
      env,
    );
  }
  if (
    plan.basedOnDeploymentSequence != null &&
    plan.basedOnDeploymentSequence !== env.deploymentSequence
  )
    return sequenceMoved(`plan ${plan.id}`, plan.basedOnDeploymentSequence, env);
  const older = stateMoved(
    `plan ${plan.id}`,
    { lineage: plan.priorStateLineage, serial: plan.priorStateSerial },
    env,
  );
  if (older) return older;
  // The one clause left: the promotion publication demands (R51).
  return orPromotion(
    await promotionRefused(m, env.name, plan.sourceRevision, now, `plan ${plan.id}`),
  );
}
