import { Injectable, type OnModuleInit } from '@nestjs/common';
import DataLoader from 'dataloader';
import { type EntityManager, In } from 'typeorm';
import type { Principal } from '../model/principal.entity.js';
import { Clock } from '../common/clock.js';
import { DeploymentId } from '../common/ids.js';
import { READ_TOGETHER } from '../common/read-together.js';
import { Database } from '../database/database.js';
import { findOne, findOneOrFail } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { DeploymentWrites } from '../fencing/deployment-writes.js';
import { idempotentCall, type RememberedOutcome } from '../idempotency/idempotency.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { Plan } from '../model/plan.entity.js';
import { Deployment, DeploymentStatus, statusAt } from '../model/deployment.entity.js';
import type {
  DeploymentsArgs,
  FinishDeploymentInput,
  HeartbeatDeploymentInput,
  ReconcileDeploymentInput,
  ReportDriftArgs,
  StartDeploymentInput,
} from './dto/deployment.input.js';

/** What a deployment decision audits and remembers under an idempotency key, and how it is replayed. */
const remembered = {
  summarize: (d: Deployment) => ({ planId: d.planId, detail: `deployment ${d.id} ${d.status}` }),
  remember: (d: Deployment): RememberedOutcome => ({ deploymentId: d.id }),
  replay: (m: EntityManager, outcome: RememberedOutcome): Promise<Deployment> | null =>
    'deploymentId' in outcome ? findOneOrFail(m, Deployment, { id: outcome.deploymentId }) : null,
};

/** Deployment decisions (through the guard, R18–R21) and reads, each as it reads at the service clock's now. */
@Injectable()
export class DeploymentsService implements OnModuleInit {
  /** The plans of the deployments a list shows, read in one statement. */
  private readonly plans = new DataLoader<string, Plan>(
    (ids) =>
      this.db
        .read((m) => m.findBy(Plan, { id: In([...ids]) }))
        .then((found) => {
          const byId = new Map(found.map((plan) => [plan.id, plan]));
          return ids.map((id) => byId.get(id) ?? new Error(`Plan ${id} does not exist`));
        }),
    READ_TOGETHER,
  );

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly decisions: DecisionRunner,
    private readonly writes: DeploymentWrites,
    private readonly metrics: MetricsService,
  ) {}

  onModuleInit(): void {
    this.metrics.deploymentGauges(() => this.counts());
  }

  async start(principal: Principal, input: StartDeploymentInput): Promise<Deployment> {
    const { idempotencyKey, ...canonical } = input;
    const deployment = await this.decisions.decideOnce(
      {
        action: 'START_DEPLOYMENT',
        environment: input.environment,
        actor: principal.name,
        planId: input.planId,
      },
      idempotentCall(principal.name, idempotencyKey, 'startDeployment', canonical),
      (tx) =>
        this.writes.start(tx, {
          environment: input.environment,
          planId: input.planId,
          principal: principal.name,
          heartbeatMs: input.heartbeatSeconds * 1000,
          now: tx.now,
        }),
      remembered,
    );
    return this.asRead(deployment);
  }

  async heartbeat(principal: Principal, input: HeartbeatDeploymentInput): Promise<Deployment> {
    const deployment = await this.decisions.decide(
      this.decision('HEARTBEAT_DEPLOYMENT', principal, input.deploymentId),
      (tx) =>
        this.writes.heartbeat(tx, {
          id: input.deploymentId,
          principal: principal.name,
          heartbeatMs: input.heartbeatSeconds * 1000,
          now: tx.now,
        }),
      remembered.summarize,
    );
    return this.asRead(deployment);
  }

  async finish(principal: Principal, input: FinishDeploymentInput): Promise<Deployment> {
    const { idempotencyKey, state: reported, ...call } = input;
    const state = reported ? { lineage: reported.lineage, serial: reported.serial } : null;
    // Only where given, so that a finish without a state keeps the fingerprint it always had (R9).
    const canonical = { ...call, detail: call.detail ?? null, ...(state ? { state } : {}) };
    const deployment = await this.decisions.decideOnce(
      this.decision('FINISH_DEPLOYMENT', principal, input.deploymentId),
      idempotencyKey
        ? idempotentCall(principal.name, idempotencyKey, 'finishDeployment', canonical)
        : null,
      (tx) =>
        this.writes.finish(tx, {
          id: input.deploymentId,
          principal: principal.name,
          outcome: input.outcome,
          detail: canonical.detail,
          state,
          now: tx.now,
        }),
      remembered,
    );
    return this.asRead(deployment);
  }

  async reconcile(principal: Principal, input: ReconcileDeploymentInput): Promise<Deployment> {
    const deployment = await this.decisions.decide(
      this.decision('RECONCILE_DEPLOYMENT', principal, input.deploymentId),
      (tx) =>
        this.writes.reconcile(tx, {
          id: input.deploymentId,
          reviewer: principal.name,
          outcome: input.outcome,
          note: input.note,
          now: tx.now,
        }),
      remembered.summarize,
    );
    return this.asRead(deployment);
  }

  /** R53: audited as REPORT_DRIFT with the detail. */
  reportDrift(principal: Principal, args: ReportDriftArgs): Promise<Environment> {
    return this.decisions.decide(
      { action: 'REPORT_DRIFT', environment: args.environment, actor: principal.name },
      (tx) =>
        this.writes.reportDrift(tx, {
          environment: args.environment,
          detail: args.detail,
          reporter: principal.name,
          now: tx.now,
        }),
      (env) => ({
        detail: `drift (deployment sequence ${env.deploymentSequence}): ${args.detail}`,
      }),
    );
  }

  async find(id: string): Promise<Deployment | null> {
    const deployment = await this.db.read((m) => findOne(m, Deployment, { id }));
    return deployment && this.asRead(deployment);
  }

  /** Newest first. NOT_FOUND for an unknown environment. */
  async list(args: DeploymentsArgs): Promise<Deployment[]> {
    const deployments = await this.db.read(async (m) => {
      if (!(await findOne(m, Environment, { name: args.environment })))
        throw EnvironmentError.notFound(args.environment);
      const query = m
        .createQueryBuilder(Deployment, 'd')
        .where('d.environment = :environment', { environment: args.environment })
        .orderBy('d.sequence', 'DESC')
        .limit(args.first);
      if (args.after)
        query.andWhere('d.sequence < :after', { after: DeploymentId.of(args.after).sequence });
      return query.getMany();
    });
    const now = await this.clock.now();
    return deployments.map((d) => statusAt(d, now));
  }

  /** The deployment of `environment` that is IN_PROGRESS or UNKNOWN, if any. */
  async active(environment: string): Promise<Deployment | null> {
    const deployment = await this.db.read((m) =>
      m
        .createQueryBuilder(Deployment, 'd')
        .where('d.environment = :environment', { environment })
        .andWhere('d.status IN (:...statuses)', {
          statuses: [DeploymentStatus.IN_PROGRESS, DeploymentStatus.UNKNOWN],
        })
        .orderBy('d.sequence', 'DESC')
        .getOne(),
    );
    return deployment && this.asRead(deployment);
  }

  /** R21: the plan of the last SUCCEEDED deployment of `environment`. */
  async deployedPlan(environment: string): Promise<Plan | null> {
    return this.db.read(async (m) => {
      const last = await m
        .createQueryBuilder(Deployment, 'd')
        .where('d.environment = :environment', { environment })
        .andWhere('d.status = :status', { status: DeploymentStatus.SUCCEEDED })
        .orderBy('d.sequence', 'DESC')
        .getOne();
      return last ? findOne(m, Plan, { id: last.planId }) : null;
    });
  }

  plan(deployment: Deployment): Promise<Plan> {
    return this.plans.load(deployment.planId);
  }

  /** For the gauges: deployments IN_PROGRESS with a live heartbeat, and UNKNOWN ones. */
  async counts(): Promise<{ active: number; unknown: number }> {
    const now = await this.clock.now();
    const row = await this.db.read((m) =>
      m
        .createQueryBuilder(Deployment, 'd')
        .select(
          `SUM(CASE WHEN d.status = 'IN_PROGRESS' AND d.heartbeatExpiresAt > :now THEN 1 ELSE 0 END)`,
          'active',
        )
        .addSelect(
          `SUM(CASE WHEN d.status = 'UNKNOWN' OR d.heartbeatExpiresAt <= :now THEN 1 ELSE 0 END)`,
          'unknown',
        )
        .where(`d.status IN ('IN_PROGRESS', 'UNKNOWN')`)
        .setParameters({ now })
        .getRawOne<{ active: string | number | null; unknown: string | number | null }>(),
    );
    return { active: Number(row?.active ?? 0), unknown: Number(row?.unknown ?? 0) };
  }

  private decision(action: string, principal: Principal, id: string) {
    return { action, environment: DeploymentId.of(id).environment, actor: principal.name };
  }

  private async asRead(deployment: Deployment): Promise<Deployment> {
    return statusAt(deployment, await this.clock.now());
  }
}
