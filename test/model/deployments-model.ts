/**
 * Reference model of deployments (DESIGN §10, R18–R21) and of the plans they deploy as far as
 * deployments decide their fate: R33 (a plan made against a deployment sequence), R56 (a plan
 * computed from a Terraform state, and the state an applier reports) and R57 (staleness is
 * decided as early as it is known). It states what the service must answer to each call and
 * what every deployment and plan must read afterwards, written as plainly as possible, with no
 * database and no concurrency.
 *
 * One MONOTONIC environment, one agent (which never goes stale: each generation it acquires is
 * the newest), one reviewer whose one approval publishes (where the environment requires
 * approval), deployers. Preconditions (DESIGN §22): the environment may require one check,
 * reported by a CHECKER (R50: publication waits for its SUCCESS; the approval or the report
 * that completes what publication needs publishes), may give a published plan a window in
 * which to start deploying (R52), and drift may be reported (R53: the deployment sequence
 * moves, proposals made against the old one turn OBSOLETE).
 */
export type Status = 'IN_PROGRESS' | 'SUCCEEDED' | 'FAILED' | 'UNKNOWN';
export type Outcome = 'SUCCEEDED' | 'FAILED';
export type PlanStatus = 'PROPOSED' | 'PUBLISHED' | 'SUPERSEDED' | 'OBSOLETE';

/** R56: a Terraform state by the two fields that order it. Lineage "": a workspace with no state yet. */
export interface State {
  lineage: string;
  serial: number;
}

export interface ModelPlan {
  id: string;
  generation: number;
  sequence: number;
  status: PlanStatus;
  /** R33: the deployment sequence it was made against, or null. */
  basedOn: number | null;
  /** R56: the state its plan file was computed from, or null (no plan file). */
  prior: State | null;
  /** R50: the latest result of the required check reported on it, if any. */
  check: CheckStatus | null;
  /** R14: the reviewer approved it (the approval recorded, publication waiting for the check). */
  approved: boolean;
  /** R52: when it was published. */
  publishedAt: number | null;
  /** R51: the commit it was made from, or null. */
  revision: string | null;
}

export type CheckStatus = 'PENDING' | 'SUCCESS' | 'FAILURE';

/** DESIGN §22: what the environment requires besides approval. */
export interface Preconditions {
  /** R50: one required check (named "scan"). */
  requiredCheck: boolean;
  /** R52: minutes, or null. */
  deployWithinMinutes: number | null;
  /** R51: soak minutes of a promotion from the upstream environment, or null (no promotion). */
  promotionSoakMinutes?: number | null;
}

export interface ModelDeployment {
  id: string;
  sequence: number;
  planId: string;
  /** As stored by the last decision; reads turn a lapsed IN_PROGRESS into UNKNOWN. */
  status: Status;
  startedBy: string;
  expiresAt: number;
  reconciledBy: string | null;
}

/**
 * An answer: `OK <id>` or the error code. INVALID_PLAN_STATE names the plan's status
 * (`INVALID_PLAN_STATE:OBSOLETE`); PRECONDITION_FAILED its reason and what it compared:
 * `PRECONDITION_FAILED:CURRENT_PLAN:<current plan id or none>`,
 * `PRECONDITION_FAILED:DEPLOYMENT_SEQUENCE:seq<the environment's sequence>`,
 * `PRECONDITION_FAILED:STATE_SERIAL:<reported lineage>:<prior serial><<reported serial>`.
 */
export type Answer = string;

export class DeploymentsModel {
  /** Every stored plan, in the order it was submitted. */
  readonly plans: ModelPlan[] = [];
  /** The plans published, in order. */
  readonly published: string[] = [];
  readonly deployments: ModelDeployment[] = [];
  /** R22: the deployment events the outbox must hold, in commit order (deployment.unknown aside: it is stored when the next write comes). */
  readonly events: string[] = [];
  /** R57: the plans audited PLAN_OBSOLETE, in audit order, and why: a deployment started, or a state was reported. */
  readonly obsoleted: { planId: string; by: 'start' | 'report' | 'drift' }[] = [];
  /** R53: drift reports so far; each moved the deployment sequence. */
  drifts = 0;
  /** R51: the upstream environment's latest finished deployment: its plan's revision, outcome and time. */
  upstream: { revision: string; outcome: Outcome; finishedAt: number } | null = null;
  /** R56: the state last reported, as the environment keeps it (forward only within a lineage). */
  state: State | null = null;
  /** The agent's newest generation (0: none yet). */
  generation = 0;
  private fence = 0;
  private current: ModelPlan | null = null;
  /** Idempotency records of startDeployment: (principal, key) → input and first answer. */
  private readonly starts = new Map<string, { input: string; answer: Answer }>();

  constructor(
    readonly environment: string,
    public now: number,
    /** Whether a plan waits for a review (else a submit publishes it at once, R5). */
    readonly requireApproval: boolean,
    /** Set once the run's first plan is published (as the test sets them). */
    public preconditions: Preconditions = { requiredCheck: false, deployWithinMinutes: null },
  ) {}

  get currentPlan(): string | null {
    return this.current?.id ?? null;
  }

  /** The environment's deployment sequence: that of the last deployment started, or drift reported (R53). */
  get deploymentSequence(): number {
    return this.deployments.length + this.drifts;
  }

  plan(id: string): ModelPlan | undefined {
    return this.plans.find((p) => p.id === id);
  }

  /**
   * The agent submits a plan under a new generation (acquired, then released) or under its
   * newest one; made against deployment sequence `basedOn` and computed from state `prior`
   * where given. R57: refused with nothing stored when either is already behind, whether or
   * not the plan would be published now. Accepted, it raises the fence (R3) and is published
   * at once unless the environment requires approval (R5).
   */
  submit(
    generation: 'new' | 'same',
    basedOn: number | null,
    prior: State | null,
    revision: string | null = null,
  ): Answer {
    if (generation === 'new' || this.generation === 0) this.generation++;
    const g = this.generation;
    const behind = this.behind(basedOn, prior);
    if (behind) return behind;
    // R51: a submit that would publish demands the promotion; refused, it stores nothing.
    const publishes = !this.requireApproval && !this.preconditions.requiredCheck;
    if (publishes && !this.promoted(revision)) return 'PRECONDITION_FAILED:PROMOTION';
    this.fence = g;
    const sequence = this.plans.filter((p) => p.generation === g).length + 1;
    const plan: ModelPlan = {
      id: `${this.environment}@${g}.${sequence}`,
      generation: g,
      sequence,
      status: 'PROPOSED',
      basedOn,
      prior: prior && { ...prior },
      check: null,
      approved: false,
      publishedAt: null,
      revision,
    };
    this.plans.push(plan);
    // R50: a plan with a required check is never published by its submit.
    if (!this.requireApproval && !this.preconditions.requiredCheck) this.publish(plan);
    this.passOver();
    return `OK ${plan.id}`;
  }

  /**
   * A reviewer approves a plan; the environment's one rule needs one approval, so an accepted
   * approval publishes (R5), under R33 and R56 again (defence in depth: R57 has made such a
   * proposal OBSOLETE already).
   */
  approve(planId: string): Answer {
    const plan = this.plan(planId);
    if (!plan) return 'NOT_FOUND';
    if (plan.generation < this.fence) return 'STALE_GENERATION';
    if (plan.status !== 'PROPOSED') return `INVALID_PLAN_STATE:${plan.status}`;
    if (plan.approved) return 'ALREADY_APPROVED';
    // R50: while the check is not SUCCESS the approval is recorded and the plan waits.
    if (this.checkPending(plan.check)) {
      plan.approved = true;
      return `OK ${plan.id}`;
    }
    const behind = this.behind(plan.basedOn, plan.prior);
    if (behind) return behind;
    if (!this.promoted(plan.revision)) return 'PRECONDITION_FAILED:PROMOTION';
    plan.approved = true;
    this.publish(plan);
    this.passOver();
    return `OK ${plan.id}`;
  }

  /**
   * R51: a plan of `revision` may be published as far as promotion goes: none is required, or
   * the upstream environment's latest finished deployment SUCCEEDED with a plan of that
   * revision at least the soak time ago. A plan without a revision is never promoted.
   */
  private promoted(revision: string | null): boolean {
    const soak = this.preconditions.promotionSoakMinutes;
    if (soak == null) return true;
    const up = this.upstream;
    return (
      revision != null &&
      up != null &&
      up.outcome === 'SUCCEEDED' &&
      up.revision === revision &&
      up.finishedAt + soak * 60_000 <= this.now
    );
  }

  /** R51: the upstream environment finished deploying a plan of `revision`. */
  upstreamFinished(revision: string, outcome: Outcome): void {
    this.upstream = { revision, outcome, finishedAt: this.now };
  }

  /** R50: the required check (if any) would not be SUCCESS with `check` as its latest result. */
  private checkPending(check: CheckStatus | null): boolean {
    return this.preconditions.requiredCheck && check !== 'SUCCESS';
  }

  /**
   * R50: a CHECKER reports the required check's result on a plan. Refused once the plan is
   * decided; the report that completes what publication needs (the approval recorded, or none
   * needed) publishes it, under R33 and R56 (refused, recording nothing, where it cannot).
   */
  reportCheck(planId: string, status: CheckStatus): Answer {
    const plan = this.plan(planId);
    if (!plan) return 'NOT_FOUND';
    if (plan.status !== 'PROPOSED') return `INVALID_PLAN_STATE:${plan.status}`;
    const completes = (plan.approved || !this.requireApproval) && !this.checkPending(status);
    if (!completes) {
      plan.check = status;
      return `OK ${plan.id}`;
    }
    if (plan.generation < this.fence) return 'STALE_GENERATION';
    const behind = this.behind(plan.basedOn, plan.prior);
    if (behind) return behind;
    if (!this.promoted(plan.revision)) return 'PRECONDITION_FAILED:PROMOTION';
    plan.check = status;
    this.publish(plan);
    this.passOver();
    return `OK ${plan.id}`;
  }

  /**
   * R53: drift moves the deployment sequence like a deployment's start; proposals made against
   * an earlier sequence turn OBSOLETE (R57).
   */
  drift(): Answer {
    this.drifts++;
    const sequence = this.deploymentSequence;
    this.obsolete('drift', (plan) => plan.basedOn != null && plan.basedOn !== sequence);
    return `OK ${this.environment}`;
  }

  /** R33, R56: why a plan made against `basedOn` from `prior` cannot be published or deployed now, or null. */
  private behind(basedOn: number | null, prior: State | null): Answer | null {
    if (basedOn != null && basedOn !== this.deploymentSequence)
      return `PRECONDITION_FAILED:DEPLOYMENT_SEQUENCE:seq${this.deploymentSequence}`;
    if (prior && this.older(prior))
      return `PRECONDITION_FAILED:STATE_SERIAL:${this.state!.lineage}:${prior.serial}<${this.state!.serial}`;
    return null;
  }

  /**
   * R56: `prior` is older than the state last reported: of its lineage at a lower serial, or
   * no state at all (lineage "") once any state was reported. Another lineage is not compared.
   */
  private older(prior: State): boolean {
    return (
      this.state != null &&
      (prior.lineage === '' ||
        (prior.lineage === this.state.lineage && prior.serial < this.state.serial))
    );
  }

  private publish(plan: ModelPlan): void {
    if (this.current) this.current.status = 'SUPERSEDED';
    plan.status = 'PUBLISHED';
    plan.publishedAt = this.now;
    this.current = plan;
    this.published.push(plan.id);
  }

  /** R8: proposals below the fence or older than the current plan can never be published. */
  private passOver(): void {
    for (const plan of this.plans) {
      if (plan.status !== 'PROPOSED') continue;
      const c = this.current;
      const olderThanCurrent =
        c != null &&
        (plan.generation < c.generation ||
          (plan.generation === c.generation && plan.sequence < c.sequence));
      if (plan.generation < this.fence || olderThanCurrent) plan.status = 'OBSOLETE';
    }
  }

  /** R57: the PROPOSED plans `stale` finds turn OBSOLETE, each audited PLAN_OBSOLETE, in the order submitted. */
  private obsolete(by: 'start' | 'report' | 'drift', stale: (plan: ModelPlan) => boolean): void {
    const ids: string[] = [];
    for (const plan of this.plans) {
      if (plan.status !== 'PROPOSED' || !stale(plan)) continue;
      plan.status = 'OBSOLETE';
      ids.push(plan.id);
    }
    for (const planId of ids) this.obsoleted.push({ planId, by });
  }

  statusOf(d: ModelDeployment): Status {
    return d.status === 'IN_PROGRESS' && d.expiresAt <= this.now ? 'UNKNOWN' : d.status;
  }

  get active(): ModelDeployment | null {
    return (
      this.deployments.find((d) => d.status === 'IN_PROGRESS' || d.status === 'UNKNOWN') ?? null
    );
  }

  /** R21: the plan of the last SUCCEEDED deployment. */
  get deployedPlan(): string | null {
    return this.deployments.findLast((d) => d.status === 'SUCCEEDED')?.planId ?? null;
  }

  start(principal: string, key: string, planId: string, heartbeatSeconds: number): Answer {
    const input = JSON.stringify({ planId, heartbeatSeconds });
    const record = this.starts.get(`${principal}/${key}`);
    if (record) return record.input === input ? record.answer : 'IDEMPOTENCY_KEY_REUSED';
    const answer = this.decideStart(principal, planId, heartbeatSeconds);
    this.starts.set(`${principal}/${key}`, { input, answer });
    return answer;
  }

  /** R18, R33, R56, in the order the service names them; R57 on success. */
  private decideStart(principal: string, planId: string, heartbeatSeconds: number): Answer {
    if (planId !== this.currentPlan)
      return `PRECONDITION_FAILED:CURRENT_PLAN:${this.currentPlan ?? 'none'}`;
    const behind = this.behind(this.current!.basedOn, this.current!.prior);
    if (behind) return behind;
    // R52: a plan published longer ago than the window is not started.
    const window = this.preconditions.deployWithinMinutes;
    if (window != null && this.current!.publishedAt! + window * 60_000 < this.now)
      return 'PRECONDITION_FAILED:DEPLOY_WINDOW';
    if (this.active) return 'DEPLOYMENT_ACTIVE';
    const sequence = this.deploymentSequence + 1;
    const id = `${this.environment}#${sequence}`;
    this.deployments.push({
      id,
      sequence,
      planId,
      status: 'IN_PROGRESS',
      startedBy: principal,
      expiresAt: this.now + heartbeatSeconds * 1000,
      reconciledBy: null,
    });
    this.events.push(`deployment.started ${id}`);
    // R57: a proposal made against an earlier sequence can never be published now.
    this.obsolete('start', (plan) => plan.basedOn != null && plan.basedOn !== sequence);
    return `OK ${id}`;
  }

  heartbeat(principal: string, id: string, heartbeatSeconds: number): Answer {
    const d = this.find(id);
    if (!d) return 'NOT_FOUND';
    if (!this.reportable(d, principal)) return 'DEPLOYMENT_NOT_ACTIVE';
    d.status = 'IN_PROGRESS';
    d.expiresAt = this.now + heartbeatSeconds * 1000;
    return `OK ${id}`;
  }

  /** R19, and R56: the state the applier reports with it, whatever the outcome. */
  finish(principal: string, id: string, outcome: Outcome, state: State | null = null): Answer {
    const d = this.find(id);
    if (!d) return 'NOT_FOUND';
    if (!this.reportable(d, principal)) return 'DEPLOYMENT_NOT_ACTIVE';
    d.status = outcome;
    if (state) this.report(state);
    this.events.push(`deployment.finished ${id}`);
    return `OK ${id}`;
  }

  /**
   * R56: the environment's state moves forward within its lineage (a state of another lineage
   * replaces it); R57: the proposals computed from an older state of the reported lineage, or
   * from no state, turn OBSOLETE.
   */
  private report(state: State): void {
    const kept = this.state;
    if (!kept || kept.lineage !== state.lineage || kept.serial <= state.serial)
      this.state = { ...state };
    this.obsolete(
      'report',
      ({ prior }) =>
        prior != null &&
        (prior.lineage === '' || (prior.lineage === state.lineage && prior.serial < state.serial)),
    );
  }

  reconcile(reviewer: string, id: string, outcome: Outcome): Answer {
    const d = this.find(id);
    if (!d) return 'NOT_FOUND';
    const status = this.statusOf(d);
    if (status === 'IN_PROGRESS') return 'DEPLOYMENT_ACTIVE';
    if (status !== 'UNKNOWN') return 'DEPLOYMENT_NOT_ACTIVE';
    d.status = outcome;
    d.reconciledBy = reviewer;
    this.events.push(`deployment.reconciled ${id}`);
    return `OK ${id}`;
  }

  /** R19: only the starter, only while IN_PROGRESS or UNKNOWN and not reconciled. */
  private reportable(d: ModelDeployment, principal: string): boolean {
    return d.startedBy === principal && (d.status === 'IN_PROGRESS' || d.status === 'UNKNOWN');
  }

  private find(id: string): ModelDeployment | undefined {
    return this.deployments.find((d) => d.id === id);
  }
}
