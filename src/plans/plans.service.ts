import { createHash } from 'node:crypto';
import DataLoader from 'dataloader';
import { Inject, Injectable } from '@nestjs/common';
import { In } from 'typeorm';
import { AuthError } from '../auth/auth.errors.js';
import { tokenCheckOf } from '../auth/principal-memory.js';
import type { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { Clock } from '../common/clock.js';
import { InputError } from '../common/errors.js';
import { READ_TOGETHER } from '../common/read-together.js';
import { sha256 } from '../common/hash.js';
import { FifoSemaphore } from '../common/fifo-semaphore.js';
import { loopTurns } from '../common/loop-turns.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, select } from '../database/database.js';
import { EnvironmentsService } from '../environments/environments.service.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import type { DecisionTx } from '../fencing/effects.js';
import { PlanWrites } from '../fencing/plan-writes.js';
import { approvalsOfRule } from '../fencing/sql.js';
import { approvalsOfPlans, pendingRulesOfPlans, snapshotLater } from './approvals.js';
import type { ApprovalRule } from '../environments/policy.model.js';
import type { Approval, ApprovalSnapshot } from './approval.model.js';
import { idempotentCall } from '../idempotency/idempotency.service.js';
import type {
  ApprovePlanInput,
  PlansArgs,
  RejectPlanInput,
  SubmitPlanInput,
} from './dto/plan.inputs.js';
import { Plan, PlanContentType, PlanStatus } from '../model/plan.entity.js';
import type { MaskedTerraformPlan, ParsedTerraformPlan } from '../terraform/terraform-plan.js';
import { readPriorState } from '../terraform/plan-file.js';
import { LARGE_PLAN_BYTES, LARGE_PLANS_AT_ONCE } from './large-plans.js';
import { exists, findOne } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { PlanId } from '../common/ids.js';
import { currentVia } from '../common/via.js';
import { FenceError, PolicyVersionChanged } from '../fencing/fence.errors.js';
import { stale } from '../fencing/rejections.js';
import { describeDecision } from '../policies/policy-decision.js';
import { PoliciesService } from '../policies/policies.service.js';
import { type Preconditions, readPreconditions } from '../fencing/preconditions.js';

/** Evaluations of one submit's policies before it gives up on policies that keep changing. */
const MAX_POLICY_ATTEMPTS = 5;

/** Rule `r` of plan `q` counts approvals of :me and is not met yet (R14, R35). */
const MY_APPROVAL_WOULD_COUNT = `(r.group_name IS NULL OR EXISTS (SELECT 1 FROM principal_groups g
    WHERE g.principal = :me AND g.group_name = r.group_name))
  AND ${approvalsOfRule('q.id', 'q.submitted_by')} < r.required_count`;

@Injectable()
export class PlansService {
  /** Large submits decided at once (large-plans.ts); the others wait their turn. */
  private readonly largePlans = new FifoSemaphore(LARGE_PLANS_AT_ONCE);

  /**
   * The approvals and pending rules of the plans a list shows are read in one statement each:
   * what is asked for while one request (or several) runs through its fields, until the event
   * loop turns, is read together. Nothing is cached: each read sees what is committed when
   * its statement runs, as a read of one plan always did.
   */
  private readonly approvalsLoader = new DataLoader<string, Approval[]>(
    (ids) => this.db.read((m) => approvalsOfPlans(m, this.db.dialect, ids)),
    READ_TOGETHER,
  );
  private readonly pendingRulesLoader = new DataLoader<
    { plan: Plan; status: PlanStatus },
    ApprovalRule[]
  >((plans) => this.db.read((m) => pendingRulesOfPlans(m, this.db.dialect, plans)), READ_TOGETHER);

  /**
   * R50, R51: each environment's preconditions as last read, by policy version (a change of
   * them bumps it): a submit whose policies were decided at that version reads them here.
   */
  private readonly preconditions = new Map<string, Preconditions>();

  /**
   * SQLite with the writer thread: by environment, the fence the last STALE_GENERATION
   * refusal named. A later submit of a generation below it is refused by the thread
   * (DecisionRunner.refuseOnThread), whose statement refuses it only if that is still the
   * fence; else the guard's statements decide it. Only the way differs: the statement
   * that writes the refusal decides it.
   */
  private readonly fenceSeen = new Map<string, number>();

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly db: Database,
    private readonly decisions: DecisionRunner,
    private readonly writes: PlanWrites,
    private readonly environments: EnvironmentsService,
    private readonly clock: Clock,
    private readonly policies: PoliciesService,
  ) {}

  /**
   * R34: the environment's plan policies are evaluated first, off the request thread and
   * outside the transaction; the decision commits only while the policy version it was
   * evaluated at is current, else they are evaluated again.
   */
  async submit(principal: Principal, input: SubmitPlanInput): Promise<Plan> {
    const bytes = Buffer.byteLength(input.content, 'utf8');
    if (bytes > this.config.maxPlanBytes) {
      throw new InputError(
        'PAYLOAD_TOO_LARGE',
        `plan content is ${bytes} bytes; the limit is ${this.config.maxPlanBytes} (PLANFENCE_MAX_PLAN_BYTES)`,
      );
    }
    // A large plan waits for its turn (LARGE_PLANS_AT_ONCE), then is decided the same way,
    // its steps (hashing, the decision's write) each from a turn of the event loop of its own
    // (common/loop-turns.ts): each holds the request thread for milliseconds per MiB, and
    // what arrived meanwhile is served between them.
    return bytes > LARGE_PLAN_BYTES
      ? this.largePlans.run(async () => {
          await loopTurns.turn();
          return this.decideSubmit(principal, input, true);
        })
      : this.decideSubmit(principal, input, false);
  }

  private async decideSubmit(
    principal: Principal,
    input: SubmitPlanInput,
    large: boolean,
  ): Promise<Plan> {
    const contentType = input.contentType ?? PlanContentType.TEXT;
    const artifact = input.artifact ?? null;
    if (artifact != null && contentType !== PlanContentType.TERRAFORM_PLAN_JSON) {
      throw new InputError('BAD_USER_INPUT', 'artifact is for TERRAFORM_PLAN_JSON plans only');
    }
    const basedOn = input.basedOnPlanId != null ? PlanId.of(input.basedOnPlanId) : null;
    if (basedOn && basedOn.environment !== input.environment) {
      // R7: it could never be the environment's current plan; nothing would ever publish.
      throw new InputError(
        'BAD_USER_INPUT',
        `basedOnPlanId ${input.basedOnPlanId} is a plan of ${basedOn.environment}, not of ${input.environment}`,
      );
    }
    // The plan file's bytes, decoded once: hashed, and read for its state.
    const artifactBytes = artifact != null ? this.artifactBytes(artifact) : null;
    const artifactHash =
      artifactBytes != null ? createHash('sha256').update(artifactBytes).digest('hex') : null;
    // R56: the state the plan file was computed from, read from its tfstate entry.
    const priorState = artifactBytes != null ? await readPriorState(artifactBytes) : null;
    // R31: computed here from the content, never taken from the client. The parsed document
    // comes back from its worker only for the environment's plan policies to read.
    let parsed: ParsedTerraformPlan | null = null;
    let terraform: MaskedTerraformPlan | null = null;
    if (contentType === PlanContentType.TERRAFORM_PLAN_JSON) {
      terraform = (await this.policies.hasPolicies(input.environment))
        ? (parsed = await this.policies.parseTerraform(input.content))
        : await this.policies.parseTerraform(input.content, 'submit', false);
    }
    const summary = terraform ? JSON.stringify(terraform.summary) : null;
    // R54: a Terraform plan is kept, and so handed out through every door, with its sensitive
    // values masked; the plan file alone holds them (DEPLOYER and ADMIN read it). Masked at
    // submit rather than on every read: nothing that stores, logs, audits or announces the
    // content can reach a value that is not there.
    const content = terraform ? terraform.masked : input.content;
    const basedOnDeploymentSequence = input.basedOnDeploymentSequence ?? null;
    const sourceRevision = input.sourceRevision ?? null;
    const canonical = {
      environment: input.environment,
      generation: input.generation,
      content: input.content,
      title: input.title ?? null,
      basedOnPlanId: input.basedOnPlanId ?? null,
      // Only where given, so that a TEXT submit keeps the fingerprint it always had (R9).
      ...(contentType !== PlanContentType.TEXT ? { contentType } : {}),
      ...(artifactHash != null ? { artifactHash } : {}),
      ...(basedOnDeploymentSequence != null ? { basedOnDeploymentSequence } : {}),
      ...(sourceRevision != null ? { sourceRevision } : {}),
    };
    for (let attempt = 1; ; attempt++) {
      const policy = await this.policies.decide({
        environment: input.environment,
        generation: input.generation,
        title: canonical.title,
        content,
        contentType,
        submitter: principal.name,
        via: currentVia(),
        sourceRevision,
        // The policies read this parse, not one of their own; a second attempt, or policies
        // that came after the parse, parse again.
        parsed,
      });
      parsed = null;
      const decision = {
        action: 'SUBMIT_PLAN',
        environment: input.environment,
        actor: principal.name,
        generation: input.generation,
        token: tokenCheckOf(principal),
      };
      const call = idempotentCall(principal.name, input.idempotencyKey, 'submitPlan', canonical);
      const submit = {
        environment: canonical.environment,
        generation: canonical.generation,
        content,
        title: canonical.title,
        basedOnPlanId: canonical.basedOnPlanId,
        contentType,
        summary,
        artifact,
        artifactHash,
        basedOnDeploymentSequence,
        priorState,
        sourceRevision,
        principal: principal.name,
        contentHash: sha256(content),
        policy,
      };
      const work = (tx: DecisionTx) => this.writes.admitPlan(tx, { ...submit, now: tx.now });
      const detail = () => describeDecision(policy);
      // The submit as the PostgreSQL statement takes it: the clock unless it reads its own,
      // and the call's key, whose record it checks.
      const inOneStatement = (now: number | null) => ({
        ...submit,
        now,
        idempotency: { principal: call.principal, key: call.key },
      });
      if (large) await loopTurns.turn();
      try {
        // PostgreSQL decides the common submit in one statement (the same rules), sent with
        // the rows it adds and the COMMIT (one round trip): one in an environment without
        // required checks or promotion (R50, R51) at the version it is decided at, which the
        // statement demands.
        // On SQLite the writer thread decides it, by the guard's statements, with what it
        // records besides the plan, while the request thread serves requests.
        const common =
          (this.db.dialect === 'postgres' || this.db.writesOnThread) &&
          this.writes.decidesInOneStatement(submit) &&
          (await this.withoutPreconditions(input.environment, policy.version));
        if (!common) return await this.decisions.decidePlan(decision, call, work, detail);
        if (this.db.dialect === 'postgres')
          return await this.decisions.decidePlanAtOnce(
            decision,
            call,
            (m, now, record) => this.writes.submitAtOnce(m, inOneStatement(now), record),
            work,
            detail,
          );
        const fence = this.fenceSeen.get(input.environment);
        if (fence !== undefined && canonical.generation < fence) {
          // Refused on the thread if the fence is still the one last seen; else decided below.
          await this.decisions.refuseOnThread(
            decision,
            call,
            stale(canonical.generation, fence, "the plan's"),
            {
              principal: principal.name,
              generation: canonical.generation,
              policyVersion: policy.version,
              fence,
            },
          );
          return await this.decisions.decidePlan(decision, call, work, detail);
        }
        return await this.decisions.decidePlanOnThread(
          decision,
          call,
          (now, record, committed) =>
            this.writes.submitOnThread(this.db, inOneStatement(now), record, committed),
          work,
          detail,
        );
      } catch (error) {
        if (error instanceof FenceError && error.code === 'STALE_GENERATION') {
          const named = Number((error.details as { fence?: unknown }).fence);
          const seen = this.fenceSeen.get(input.environment) ?? 0;
          if (Number.isInteger(named)) this.fenceSeen.set(input.environment, Math.max(seen, named));
        }
        if (!(error instanceof PolicyVersionChanged) || attempt >= MAX_POLICY_ATTEMPTS) throw error;
        this.policies.forget(input.environment);
      }
    }
  }

  /**
   * Whether `environment` requires no checks and no promotion at policy version `version`
   * (false when the version read is another, or there is no such environment: the submit is
   * then decided by the statements, which name the refusal).
   */
  private async withoutPreconditions(environment: string, version: number): Promise<boolean> {
    let known = this.preconditions.get(environment);
    if (known?.policyVersion !== version) {
      const read = await this.db.read(async (m) =>
        (await exists(m, Environment, { name: environment }))
          ? readPreconditions(m, environment)
          : null,
      );
      if (!read) return false;
      known = read;
      this.preconditions.set(environment, known);
    }
    return (
      known.policyVersion === version &&
      known.requiredChecks.length === 0 &&
      known.promotionFrom == null
    );
  }

  /**
   * The service's address as its clients reach it: PLANFENCE_PUBLIC_URL, else http:// and the
   * request's Host (when it is a plain host[:port]), else http://localhost.
   */
  baseUrl(headers: Record<string, string | string[] | undefined> | undefined): string {
    if (this.config.mcp.publicUrl) return this.config.mcp.publicUrl;
    const host = headers?.host;
    return typeof host === 'string' &&
      /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host)
      ? `http://${host}`
      : 'http://localhost';
  }

  /** The artifact's bytes; BAD_USER_INPUT unless it is base64 within PLANFENCE_MAX_ARTIFACT_BYTES. */
  private artifactBytes(artifact: string): Buffer {
    if (artifact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(artifact)) {
      throw new InputError('BAD_USER_INPUT', 'artifact must be base64 (RFC 4648, padded)');
    }
    const max = this.config.maxArtifactBytes;
    // Decoded size from the text alone: nothing of an oversized artifact is decoded.
    const size =
      (artifact.length / 4) * 3 - (artifact.endsWith('==') ? 2 : artifact.endsWith('=') ? 1 : 0);
    if (size > max) {
      throw new InputError(
        'BAD_USER_INPUT',
        `artifact is ${size} bytes; the limit is ${max} (PLANFENCE_MAX_ARTIFACT_BYTES)`,
      );
    }
    return Buffer.from(artifact, 'base64');
  }

  /**
   * R13–R17. A break-glass approval (breakGlassReason) is for ADMINs only: FORBIDDEN for
   * anyone else, audited like every rejection. The accepted decision's audit event says
   * whether it published, and the break-glass reason.
   */
  async approve(principal: Principal, input: ApprovePlanInput): Promise<Plan> {
    const { idempotencyKey, ...call } = input;
    const breakGlassReason = call.breakGlassReason ?? null;
    const deploymentSequence = call.deploymentSequence ?? null;
    const canonical = {
      planId: call.planId,
      contentHash: call.contentHash ?? null,
      ...(breakGlassReason != null ? { breakGlassReason } : {}),
      ...(deploymentSequence != null ? { deploymentSequence } : {}),
    };
    // The door is read here, in the request's own context (currentVia).
    const via = currentVia();
    const { environment, generation } = PlanId.of(input.planId);
    // The approvals as the decision left them, read with its commit (the last attempt's).
    const last: { snapshot?: { of: Plan; read: Promise<ApprovalSnapshot> } } = {};
    const plan = await this.decisions.decidePlan(
      {
        action: 'APPROVE_PLAN',
        environment,
        actor: principal.name,
        generation,
        planId: input.planId,
        token: tokenCheckOf(principal),
      },
      idempotencyKey
        ? idempotentCall(principal.name, idempotencyKey, 'approvePlan', canonical)
        : null,
      async (tx) => {
        if (breakGlassReason != null && principal.role !== Role.ADMIN) {
          throw new AuthError(
            'FORBIDDEN',
            `only an ADMIN may approve with breakGlassReason; ${principal.name} is ${principal.role}`,
          );
        }
        const plan = await this.writes.approvePlan(tx, {
          planId: canonical.planId,
          contentHash: canonical.contentHash,
          breakGlassReason,
          deploymentSequence,
          via,
          reviewer: principal.name,
          now: tx.now,
        });
        last.snapshot = { of: plan, read: snapshotLater(tx.manager, plan) };
        return plan;
      },
      (plan) => {
        if (plan.status !== PlanStatus.PUBLISHED) return 'approval recorded; not yet published';
        return breakGlassReason != null
          ? `published by break-glass: ${breakGlassReason}`
          : 'published';
      },
    );
    // A replayed call answers the plan as it is now (its approvals read when asked for).
    if (last.snapshot?.of === plan) plan.snapshot = await last.snapshot.read;
    return plan;
  }

  reject(principal: Principal, input: RejectPlanInput): Promise<Plan> {
    const { idempotencyKey, ...call } = input;
    const canonical = { planId: call.planId, reason: call.reason };
    const { environment, generation } = PlanId.of(input.planId);
    return this.decisions.decidePlan(
      {
        action: 'REJECT_PLAN',
        environment,
        actor: principal.name,
        generation,
        planId: input.planId,
        token: tokenCheckOf(principal),
      },
      idempotencyKey
        ? idempotentCall(principal.name, idempotencyKey, 'rejectPlan', canonical)
        : null,
      (tx) => this.writes.rejectPlan(tx, { ...canonical, reviewer: principal.name, now: tx.now }),
    );
  }

  find(id: string): Promise<Plan | null> {
    return this.db.read((m) => findOne(m, Plan, { id }));
  }

  /**
   * Newest first by (generation, sequence). NOT_FOUND for an unknown environment. PROPOSED
   * and EXPIRED are filtered by the status reads show (R16), before any write stored it.
   */
  async list(args: PlansArgs): Promise<Plan[]> {
    await this.environments.get(args.environment);
    const now = await this.clock.now();
    return this.db.read((m) => {
      const query = m
        .createQueryBuilder(Plan, 'p')
        .where('p.environment = :environment', { environment: args.environment })
        .orderBy('p.generation', 'DESC')
        .addOrderBy('p.sequence', 'DESC')
        .limit(args.first);
      if (args.status === PlanStatus.EXPIRED) {
        query.andWhere(
          "(p.status = 'EXPIRED' OR (p.status = 'PROPOSED' AND p.expires_at <= :now))",
          { now },
        );
      } else if (args.status === PlanStatus.PROPOSED) {
        query.andWhere("p.status = 'PROPOSED' AND (p.expires_at IS NULL OR p.expires_at > :now)", {
          now,
        });
      } else if (args.status) {
        query.andWhere('p.status = :status', { status: args.status });
      }
      if (args.after) {
        const after = PlanId.of(args.after);
        query.andWhere('(p.generation < :g OR (p.generation = :g AND p.sequence < :s))', {
          g: after.generation,
          s: after.sequence,
        });
      }
      return query.getMany();
    });
  }

  /** R16: what reads show: a PROPOSED plan reads EXPIRED from the instant the clock reaches its expiresAt. */
  async status(plan: Plan): Promise<PlanStatus> {
    if (plan.status !== PlanStatus.PROPOSED || plan.expiresAt == null) return plan.status;
    return plan.expiresAt.getTime() <= (await this.clock.now())
      ? PlanStatus.EXPIRED
      : PlanStatus.PROPOSED;
  }

  approvals(plan: Plan): Promise<Approval[]> {
    if (plan.snapshot) return Promise.resolve(plan.snapshot.approvals);
    return this.approvalsLoader.load(plan.id);
  }

  async pendingApprovalRules(plan: Plan): Promise<ApprovalRule[]> {
    if (plan.snapshot) return plan.snapshot.pendingApprovalRules;
    return this.pendingRulesLoader.load({ plan, status: await this.status(plan) });
  }

  /**
   * PROPOSED plans, across environments, that `principal` may approve now: not their own, not
   * approved by them yet, not expired, and with a rule their approval would count toward that
   * is still unmet. Oldest first.
   */
  async reviewQueue(principal: Principal, first: number): Promise<Plan[]> {
    const now = await this.clock.now();
    return this.db.read(async (m) => {
      const rows = await select<{ id: string }>(
        m,
        `SELECT q.id FROM plans q
         WHERE q.status = 'PROPOSED' AND (q.expires_at IS NULL OR q.expires_at > :now)
           AND q.submitted_by <> :me
           AND NOT EXISTS (SELECT 1 FROM approvals mine WHERE mine.plan_id = q.id AND mine.approver = :me)
           AND (EXISTS (SELECT 1 FROM approval_rules r WHERE r.environment = q.environment
             AND ${MY_APPROVAL_WOULD_COUNT})
             OR EXISTS (SELECT 1 FROM plan_approval_rules r WHERE r.plan_id = q.id
             AND ${MY_APPROVAL_WOULD_COUNT}))
         ORDER BY q.submitted_at, q.id LIMIT :first`,
        { now, me: principal.name, first },
      );
      if (!rows.length) return [];
      const plans = await m.findBy(Plan, { id: In(rows.map((row) => row.id)) });
      const byId = new Map(plans.map((plan) => [plan.id, plan]));
      return rows.map((row) => byId.get(row.id)!);
    });
  }
}
