/**
 * Reference model of deployments (DESIGN §10, R18–R21, and R33 for plans made against a
 * deployment sequence): what the service must answer to each call and what every
 * deployment must read afterwards, written as plainly as possible, with no database and no
 * concurrency.
 */
export type Status = 'IN_PROGRESS' | 'SUCCEEDED' | 'FAILED' | 'UNKNOWN';
export type Outcome = 'SUCCEEDED' | 'FAILED';

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
 * An answer: `OK <deployment id>` or the error code; R33's PRECONDITION_FAILED names the
 * environment's deployment sequence: `PRECONDITION_FAILED:seq<n>`.
 */
export type Answer = string;

export class DeploymentsModel {
  readonly plans: string[] = [];
  /** R33: the deployment sequence each plan was made against (absent: none given). */
  private readonly basedOn = new Map<string, number>();
  readonly deployments: ModelDeployment[] = [];
  /** R22: the deployment events the outbox must hold, in commit order (deployment.unknown aside: it is stored when the next write comes). */
  readonly events: string[] = [];
  private generation = 0;
  /** Idempotency records of startDeployment: (principal, key) → input and first answer. */
  private readonly starts = new Map<string, { input: string; answer: Answer }>();

  constructor(
    readonly environment: string,
    public now: number,
  ) {}

  get currentPlan(): string | null {
    return this.plans.at(-1) ?? null;
  }

  /** The environment's deployment sequence: that of the last deployment started. */
  get deploymentSequence(): number {
    return this.deployments.length;
  }

  /**
   * An agent acquires a new generation, submits one plan (published at once, R33: only while
   * the deployment sequence is still `basedOn`, else nothing is stored) and releases.
   */
  publish(basedOn: number | null = null): Answer {
    this.generation++;
    if (basedOn != null && basedOn !== this.deploymentSequence) return this.sequenceMoved();
    const id = `${this.environment}@${this.generation}.1`;
    this.plans.push(id);
    if (basedOn != null) this.basedOn.set(id, basedOn);
    return `OK ${id}`;
  }

  private sequenceMoved(): Answer {
    return `PRECONDITION_FAILED:seq${this.deploymentSequence}`;
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

  private decideStart(principal: string, planId: string, heartbeatSeconds: number): Answer {
    if (planId !== this.currentPlan) return 'PRECONDITION_FAILED';
    const basedOn = this.basedOn.get(planId);
    if (basedOn !== undefined && basedOn !== this.deploymentSequence) return this.sequenceMoved();
    if (this.active) return 'DEPLOYMENT_ACTIVE';
    const sequence = this.deployments.length + 1;
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

  finish(principal: string, id: string, outcome: Outcome): Answer {
    const d = this.find(id);
    if (!d) return 'NOT_FOUND';
    if (!this.reportable(d, principal)) return 'DEPLOYMENT_NOT_ACTIVE';
    d.status = outcome;
    this.events.push(`deployment.finished ${id}`);
    return `OK ${id}`;
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
