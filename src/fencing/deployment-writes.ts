import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuditOutcome } from '../model/audit-event.entity.js';
import { changedOrRetry, execute, select, updateReturning } from '../database/database.js';
import { findOne, findOneOrFail } from '../database/rows.js';
import {
  Deployment,
  DeploymentOutcome,
  DeploymentStatus,
  statusAt,
} from '../model/deployment.entity.js';
import { DeploymentError } from '../model/deployments.errors.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import type { EventType } from '../outbox/outbox-event.js';
import { DeploymentId, PlanId } from '../common/ids.js';
import type { DecisionTx } from './effects.js';
import { stateOlder } from './rejections.js';
import { ACTIVE_DEPLOYMENT, priorStateOlder, stateNotOlder, withinDeployWindow } from './sql.js';

/**
 * The guard's deployment writes (docs/design.md §10, R18–R21). Every statement that writes a deployment row
 * or status, or an environment's deployment sequence, is in this class; each decision is
 * one conditional statement whose affected-row count decides (R2), and the rows are read
 * only afterwards, to name a rejection.
 *
 * Every method runs inside the caller's write transaction (`m`) and throws a rejection
 * only before it has written anything but the UNKNOWN status of lapsed deployments, which
 * is true whatever the decision.
 */
@Injectable()
export class DeploymentWrites {
  /**
   * R19: an IN_PROGRESS deployment whose heartbeat lapsed by `now` is stored as UNKNOWN (it
   * already reads so). In one environment, or in all of them (`null`: the retention job).
   */
  async markLapsed(tx: DecisionTx, environment: string | null, now: number): Promise<number> {
    const m = tx.manager;
    const lapsed = await updateReturning<{ id: string }>(
      m,
      `UPDATE deployments SET status = 'UNKNOWN'
       WHERE status = 'IN_PROGRESS' AND heartbeat_expires_at <= :now
         ${environment != null ? 'AND environment = :environment' : ''}
       RETURNING id`,
      { now, environment },
    );
    for (const { id } of lapsed) {
      const deployment = await findOneOrFail(m, Deployment, { id });
      tx.decided({
        kind: 'audit',
        at: now,
        entry: {
          environment: deployment.environment,
          actor: 'planfence',
          action: 'DEPLOYMENT_LAPSED',
          planId: deployment.planId,
          outcome: AuditOutcome.ACCEPTED,
          detail: `the heartbeat of deployment ${id} lapsed: its outcome is UNKNOWN`,
        },
      });
      this.changed(tx, deployment);
      this.announce(tx, 'deployment.unknown', deployment, 'planfence', now);
    }
    return lapsed.length;
  }

  /**
   * R18: accepted iff `planId` is the environment's current plan, the environment's
   * deployment sequence is still the one the plan was made against (R33, where the plan
   * names one) and none of its deployments is IN_PROGRESS or UNKNOWN; the new row takes the
   * environment's next deployment sequence. Rejections: NOT_FOUND, PRECONDITION_FAILED
   * {currentPlanId} or {currentPlanId, deploymentSequence}, DEPLOYMENT_ACTIVE
   * {deploymentId, status}.
   */
  async start(
    tx: DecisionTx,
    p: { environment: string; planId: string; principal: string; heartbeatMs: number; now: number },
  ): Promise<Deployment> {
    const m = tx.manager;
    await this.markLapsed(tx, p.environment, p.now);
    // Two concurrent starts (PostgreSQL) compute the same sequence: the unique index on
    // (environment, sequence) fails the later one, whose transaction runs again and then
    // sees the first deployment.
    const [inserted] = await select<{ sequence: number | string }>(
      m,
      `INSERT INTO deployments (id, environment, sequence, plan_id, status, started_by,
         started_at, heartbeat_expires_at)
       SELECT e.name || '#' || CAST(e.deployment_sequence + 1 AS VARCHAR(12)), e.name,
         e.deployment_sequence + 1, CAST(:planId AS VARCHAR(100)), 'IN_PROGRESS',
         CAST(:principal AS VARCHAR(63)), CAST(:now AS BIGINT), CAST(:expiresAt AS BIGINT)
       FROM environments e
       WHERE e.name = :environment AND e.current_plan_id = :planId
         AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = :planId
                         AND p.based_on_deployment_sequence <> e.deployment_sequence)
         AND ${stateNotOlder(':planId', 'e')}
         AND ${withinDeployWindow(':planId', 'e')}
         AND NOT EXISTS (SELECT 1 FROM deployments d WHERE d.environment = :environment
                         AND d.${ACTIVE_DEPLOYMENT})
       RETURNING sequence`,
      { ...p, expiresAt: p.now + p.heartbeatMs },
    );
    if (!inserted) throw await this.whyStartRejected(m, p);
    const sequence = Number(inserted.sequence);
    // The sequence is the environment's counter: it moves with the row, in this transaction,
    // and only while the pointer still names the plan (a publication that committed meanwhile
    // makes this transaction run again and see it).
    changedOrRetry(
      await execute(
        m,
        `UPDATE environments SET deployment_sequence = :sequence
         WHERE name = :environment AND deployment_sequence = :previous AND current_plan_id = :planId`,
        { ...p, sequence, previous: sequence - 1 },
      ),
    );
    const deployment = await findOneOrFail(m, Deployment, {
      id: DeploymentId.format(p.environment, sequence),
    });
    this.changed(tx, deployment);
    this.announce(tx, 'deployment.started', deployment, p.principal, p.now);
    // R57: proposals made against the sequence that just moved can never be published.
    await this.obsolete(
      tx,
      p.environment,
      `based_on_deployment_sequence IS NOT NULL AND based_on_deployment_sequence <> :sequence`,
      { sequence },
      `deployment ${deployment.id} started: the plan was made against an earlier deployment sequence`,
      p.now,
    );
    return deployment;
  }

  /**
   * R57: the PROPOSED plans of `environment` that `where` (over `plans`) finds stale turn
   * OBSOLETE in this transaction: they leave the review queue and their approvals are void
   * with them. Each is audited as PLAN_OBSOLETE with `why`.
   */
  private async obsolete(
    tx: DecisionTx,
    environment: string,
    where: string,
    params: Record<string, unknown>,
    why: string,
    now: number,
  ): Promise<void> {
    const m = tx.manager;
    const stale = await updateReturning<{ id: string }>(
      m,
      `UPDATE plans SET status = 'OBSOLETE'
       WHERE environment = :environment AND status = 'PROPOSED' AND ${where}
       RETURNING id`,
      { ...params, environment },
    );
    // In the order submitted: RETURNING's order is not promised on PostgreSQL.
    for (const id of stale.map((row) => row.id).sort(PlanId.compare)) {
      tx.decided({
        kind: 'audit',
        at: now,
        entry: {
          environment,
          actor: 'planfence',
          action: 'PLAN_OBSOLETE',
          planId: id,
          outcome: AuditOutcome.ACCEPTED,
          detail: `${id} is OBSOLETE: ${why}`,
        },
      });
    }
  }

  /**
   * R56: records the Terraform state an applier reported after deployment `id`: the
   * environment's state moves forward within its lineage (a state of another lineage
   * replaces it); the proposals computed from an older state of that lineage turn OBSOLETE
   * (R57).
   */
  private async reportState(
    tx: DecisionTx,
    id: string,
    state: { lineage: string; serial: number },
    now: number,
  ): Promise<void> {
    const m = tx.manager;
    const { environment } = DeploymentId.of(id);
    await execute(
      m,
      `UPDATE environments SET state_lineage = :lineage, state_serial = :serial
       WHERE name = :environment
         AND (state_lineage IS NULL OR state_lineage <> :lineage OR state_serial <= :serial)`,
      { ...state, environment },
    );
    await this.obsolete(
      tx,
      environment,
      priorStateOlder(
        { lineage: 'prior_state_lineage', serial: 'prior_state_serial' },
        { lineage: ':lineage', serial: ':serial' },
      ),
      state,
      `deployment ${id} reported state serial ${state.serial}: the plan was computed from an older state`,
      now,
    );
  }

  /**
   * R53: drift reported on `environment` moves its deployment sequence as a deployment's
   * start does (the next start takes the sequence after it), so that every plan made
   * against an earlier sequence is stale under R33; the proposals among them turn OBSOLETE in
   * this transaction (R57), and the environment records when. Announced as
   * environment.drifted. NOT_FOUND for an unknown environment.
   */
  async reportDrift(
    tx: DecisionTx,
    p: { environment: string; detail: string; reporter: string; now: number },
  ): Promise<Environment> {
    const m = tx.manager;
    const [moved] = await updateReturning<{ sequence: number | string }>(
      m,
      `UPDATE environments SET deployment_sequence = deployment_sequence + 1,
         drift_reported_at = :now
       WHERE name = :environment
       RETURNING deployment_sequence AS sequence`,
      p,
    );
    if (!moved) throw EnvironmentError.notFound(p.environment);
    const sequence = Number(moved.sequence);
    await this.obsolete(
      tx,
      p.environment,
      `based_on_deployment_sequence IS NOT NULL AND based_on_deployment_sequence <> :sequence`,
      { sequence },
      `drift was reported (deployment sequence ${sequence}): the plan was made against an earlier deployment sequence`,
      p.now,
    );
    const env = await findOneOrFail(m, Environment, { name: p.environment });
    tx.decided({
      kind: 'outbox',
      subject: 'event',
      type: 'environment.drifted',
      actor: p.reporter,
      at: p.now,
      event: {
        environment: env.name,
        type: 'environment.drifted',
        at: p.now,
        generation: null,
        sequence: null,
        planId: null,
        deploymentSequence: sequence,
        actor: p.reporter,
        data: { name: env.name, deploymentSequence: sequence, detail: p.detail },
      },
    });
    return env;
  }

  /** R19: only the starter, only while IN_PROGRESS or UNKNOWN and unreconciled; it reads IN_PROGRESS again. */
  async heartbeat(
    tx: DecisionTx,
    p: { id: string; principal: string; heartbeatMs: number; now: number },
  ): Promise<Deployment> {
    const m = tx.manager;
    await this.markLapsed(tx, DeploymentId.of(p.id).environment, p.now);
    const params = { ...p, expiresAt: p.now + p.heartbeatMs };
    // A heartbeat after a lapse (before any reconcile) brings the deployment back: a change of status.
    const revived = await execute(
      m,
      `UPDATE deployments SET heartbeat_expires_at = :expiresAt, status = 'IN_PROGRESS'
       WHERE id = :id AND started_by = :principal AND status = 'UNKNOWN'`,
      params,
    );
    const beaten =
      revived ||
      (await execute(
        m,
        `UPDATE deployments SET heartbeat_expires_at = :expiresAt
         WHERE id = :id AND started_by = :principal AND status = 'IN_PROGRESS'`,
        params,
      ));
    if (!beaten) throw await this.whyReportRejected(m, p);
    const deployment = await findOneOrFail(m, Deployment, { id: p.id });
    if (revived) this.changed(tx, deployment);
    return deployment;
  }

  /** R19: the starter's report, while IN_PROGRESS or UNKNOWN and unreconciled. */
  async finish(
    tx: DecisionTx,
    p: {
      id: string;
      principal: string;
      outcome: DeploymentOutcome;
      detail: string | null;
      /** R56: the Terraform state after the apply, as the applier read it. */
      state?: { lineage: string; serial: number } | null;
      now: number;
    },
  ): Promise<Deployment> {
    const m = tx.manager;
    await this.markLapsed(tx, DeploymentId.of(p.id).environment, p.now);
    const finished = await execute(
      m,
      `UPDATE deployments SET status = :outcome, finished_at = :now, detail = :detail
       WHERE id = :id AND started_by = :principal AND ${ACTIVE_DEPLOYMENT}`,
      p,
    );
    if (!finished) throw await this.whyReportRejected(m, p);
    if (p.state) await this.reportState(tx, p.id, p.state, p.now);
    const deployment = await this.ended(tx, p.id, p.outcome);
    this.announce(tx, 'deployment.finished', deployment, p.principal, p.now);
    return deployment;
  }

  /**
   * R20: a REVIEWER or ADMIN resolves an UNKNOWN deployment. A live IN_PROGRESS one →
   * DEPLOYMENT_ACTIVE {status}; a finished one → DEPLOYMENT_NOT_ACTIVE {status}.
   */
  async reconcile(
    tx: DecisionTx,
    p: { id: string; reviewer: string; outcome: DeploymentOutcome; note: string; now: number },
  ): Promise<Deployment> {
    const m = tx.manager;
    await this.markLapsed(tx, DeploymentId.of(p.id).environment, p.now);
    const reconciled = await execute(
      m,
      `UPDATE deployments SET status = :outcome, finished_at = :now, reconciled_by = :reviewer,
         reconcile_note = :note
       WHERE id = :id AND (status = 'UNKNOWN'
         OR (status = 'IN_PROGRESS' AND heartbeat_expires_at <= :now))`,
      p,
    );
    if (!reconciled) {
      const deployment = await this.deployment(m, p.id, p.now);
      if (deployment.status === DeploymentStatus.IN_PROGRESS) {
        throw new DeploymentError(
          'DEPLOYMENT_ACTIVE',
          `deployment ${p.id} is IN_PROGRESS with a live heartbeat: only an UNKNOWN one is reconciled`,
          { deploymentId: deployment.id, status: deployment.status },
        );
      }
      throw this.notActive(deployment, `deployment ${p.id} is already ${deployment.status}`);
    }
    const deployment = await this.ended(tx, p.id, p.outcome);
    this.announce(tx, 'deployment.reconciled', deployment, p.reviewer, p.now);
    return deployment;
  }

  private async ended(tx: DecisionTx, id: string, outcome: DeploymentOutcome) {
    const m = tx.manager;
    const deployment = await findOneOrFail(m, Deployment, { id });
    tx.decided({ kind: 'deploymentEnded', outcome });
    this.changed(tx, deployment);
    return deployment;
  }

  /** The deployment's subscribers hear of its change. */
  private changed(tx: DecisionTx, deployment: Deployment): void {
    tx.decided({ kind: 'deploymentChanged', deployment });
  }

  /** The deployment's outbox event (R22). */
  private announce(
    tx: DecisionTx,
    type: EventType,
    deployment: Deployment,
    actor: string,
    at: number,
  ): void {
    tx.decided({ kind: 'outbox', subject: 'deployment', type, deployment, actor, at });
  }

  /** The deployment as it reads at `now`, or NOT_FOUND. */
  private async deployment(m: EntityManager, id: string, now: number): Promise<Deployment> {
    const deployment = await findOne(m, Deployment, { id });
    if (!deployment) throw DeploymentError.notFound(id);
    return statusAt(deployment, now);
  }

  private notActive(deployment: Deployment, message: string): DeploymentError {
    return new DeploymentError('DEPLOYMENT_NOT_ACTIVE', message, { status: deployment.status });
  }

  private async whyStartRejected(
    m: EntityManager,
    p: { environment: string; planId: string; now: number },
  ): Promise<Error> {
    const env = await findOne(m, Environment, { name: p.environment });
    if (!env) return EnvironmentError.notFound(p.environment);
    if (env.currentPlanId !== p.planId) {
      return new DeploymentError(
        'PRECONDITION_FAILED',
        `plan ${p.planId} is not the current plan of "${p.environment}"`,
        { reason: 'CURRENT_PLAN', currentPlanId: env.currentPlanId },
      );
    }
    const [plan] = await select<{
      basedOn: number | string | null;
      lineage: string | null;
      serial: number | string | null;
      publishedAt: number | string | null;
    }>(
      m,
      `SELECT based_on_deployment_sequence AS "basedOn", prior_state_lineage AS lineage,
         prior_state_serial AS serial, published_at AS "publishedAt"
       FROM plans WHERE id = :planId`,
      p,
    );
    const basedOn = plan.basedOn != null ? Number(plan.basedOn) : null;
    if (basedOn != null && basedOn !== env.deploymentSequence) {
      return new DeploymentError(
        'PRECONDITION_FAILED',
        `plan ${p.planId} was made against deployment sequence ${basedOn} of "${p.environment}", which has moved on to ${env.deploymentSequence}: plan again`,
        {
          reason: 'DEPLOYMENT_SEQUENCE',
          currentPlanId: env.currentPlanId,
          deploymentSequence: env.deploymentSequence,
        },
      );
    }
    const older = stateOlder(plan, env);
    if (older) {
      return new DeploymentError(
        'PRECONDITION_FAILED',
        `plan ${p.planId} ${older.message}`,
        older.extensions,
      );
    }
    // R52: the window in which a published plan must start deploying (the plan is the
    // current one, checked above: it was published).
    const deployBy =
      env.deployWithinMinutes != null
        ? Number(plan.publishedAt) + env.deployWithinMinutes * 60_000
        : null;
    if (deployBy != null && deployBy < p.now) {
      return new DeploymentError(
        'PRECONDITION_FAILED',
        `plan ${p.planId} was published more than ${env.deployWithinMinutes} minutes ago and had to start deploying by ${new Date(deployBy).toISOString()}: plan again`,
        {
          reason: 'DEPLOY_WINDOW',
          currentPlanId: env.currentPlanId,
          deployBy: new Date(deployBy).toISOString(),
        },
      );
    }
    // The start statement's one clause left: a deployment of the environment is active.
    const [active] = await select<{ id: string }>(
      m,
      `SELECT id FROM deployments WHERE environment = :environment AND ${ACTIVE_DEPLOYMENT}
       ORDER BY sequence DESC LIMIT 1`,
      p,
    );
    const deployment = await this.deployment(m, active.id, p.now);
    return new DeploymentError(
      'DEPLOYMENT_ACTIVE',
      `deployment ${deployment.id} of "${p.environment}" is ${deployment.status}`,
      { deploymentId: deployment.id, status: deployment.status },
    );
  }

  private async whyReportRejected(
    m: EntityManager,
    p: { id: string; principal: string; now: number },
  ): Promise<Error> {
    const deployment = await this.deployment(m, p.id, p.now);
    if (deployment.startedBy !== p.principal) {
      return this.notActive(
        deployment,
        `deployment ${p.id} was started by ${deployment.startedBy}: only its starter reports on it`,
      );
    }
    const by = deployment.reconciledBy ? `, reconciled by ${deployment.reconciledBy}` : '';
    return this.notActive(deployment, `deployment ${p.id} is already ${deployment.status}${by}`);
  }
}
