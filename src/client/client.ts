import { randomUUID } from 'node:crypto';
import { setTimeout as wait } from 'node:timers/promises';
import {
  errorFromBody,
  type GraphQLErrorBody,
  IdempotencyInProgressError,
  LeaseNotHeldError,
  RateLimitedError,
  TransportError,
} from './errors.js';

// The contract's types, generated from docs/contract.graphql (`npm run codegen`): the
// client's types are these, or the fields of them it selects.
import type * as schema from './schema.js';

export type FencingMode = schema.FencingMode;
export type PlanStatus = schema.PlanStatus;
export type Role = schema.Role;
export type PlanContentType = schema.PlanContentType;

export type Lease = schema.Lease;

/** The fields of a plan every read of the client selects. */
export type Plan = Pick<
  schema.Plan,
  | 'id'
  | 'environment'
  | 'generation'
  | 'sequence'
  | 'status'
  | 'title'
  | 'content'
  | 'contentHash'
  | 'submittedBy'
  | 'submittedAt'
  | 'basedOnPlanId'
  | 'reviewedBy'
  | 'reviewedAt'
  | 'rejectionReason'
  | 'publishedAt'
>;

/** One resource in a Terraform plan's summary. */
export type ResourceChange = schema.ResourceChange;

/** Computed by the service from a TERRAFORM_PLAN_JSON plan; immutable (DESIGN §15). */
export type PlanSummary = schema.PlanSummary;

/** A plan with what DESIGN §15 adds: its content type, summary, artifact and provenance. */
export interface TerraformPlan extends Plan {
  contentType: PlanContentType;
  summary: PlanSummary | null;
  /** Base64 of the binary plan file, when one was submitted (null once purged). */
  artifact: string | null;
  /** sha256 of the artifact's bytes, lowercase hex. */
  artifactHash: string | null;
  basedOnDeploymentSequence: number | null;
  sourceRevision: string | null;
  /** The state the plan file was computed from, read by the service from its tfstate entry (R56). */
  priorState: TerraformState | null;
}

/** A Terraform state's identity: `terraform state pull` reads it; each write raises `serial` (R56). */
export type TerraformState = schema.TerraformState;

/** One check's latest result on a plan (DESIGN R50). */
export type CheckResult = schema.CheckResult;

/**
 * Every field of the contract's Plan: what `planInFull` reads and `planfence plan show
 * --json` prints. `artifact` is selected only when asked for (DEPLOYER and ADMIN may read it,
 * R54), else it is absent.
 */
export interface FullPlan extends TerraformPlan {
  approvals: (Approval & {
    person: { issuer: string; subject: string; email: string | null; name: string | null } | null;
    via: string | null;
  })[];
  pendingApprovalRules: ApprovalRule[];
  expiresAt: string | null;
  purgedAt: string | null;
  policyResults: PolicyResult[];
  /** Absent from a service older than the contract (DESIGN R50), as any field its schema lacks. */
  checks?: CheckResult[];
  pendingChecks?: string[];
  /** The console page where a person reviews this plan. */
  reviewUrl: string;
}

export interface Environment {
  name: string;
  mode: FencingMode;
  requireApproval: boolean;
  fence: number;
  lastIssuedGeneration: number;
  lease: Lease | null;
  currentPlan: Plan | null;
  createdAt: string;
  /** The sequence of the last deployment started (0: none yet): what a plan is made against (R33). */
  deploymentSequence: number;
  /** The Terraform state an applier last reported (R56); null before any report. */
  terraformState: TerraformState | null;
}

export type Principal = Pick<schema.Principal, 'name' | 'role' | 'createdAt' | 'revokedAt'>;

export type AuditEvent = Pick<
  schema.AuditEvent,
  | 'id'
  | 'at'
  | 'environment'
  | 'actor'
  | 'action'
  | 'generation'
  | 'planId'
  | 'outcome'
  | 'code'
  | 'detail'
>;

export interface RetryOptions {
  /** Attempts in all, the first included (default 6). */
  attempts?: number;
  /** First back-off in ms, doubled each retry, with full jitter (default 100). */
  baseDelayMs?: number;
  /** Longest back-off in ms (default 3000). */
  maxDelayMs?: number;
  /**
   * RATE_LIMITED: the longest `retryAfterSeconds` the client waits out (plus up to 10%
   * jitter) before sending the same call again, in ms (default 30000). A longer wait, or
   * running out of `attempts`, throws RateLimitedError.
   */
  maxRateLimitWaitMs?: number;
}

export interface ClientOptions {
  /** The service's base URL, e.g. http://127.0.0.1:4000 */
  url: string;
  token: string;
  retry?: RetryOptions;
  /** Replaces global fetch (tests inject transport failures with it). */
  fetch?: typeof fetch;
  /**
   * A request not answered within this many ms is abandoned as a TransportError (and retried
   * where the call retries transport failures, with its idempotency key). Default: none.
   */
  requestTimeoutMs?: number;
}

export interface LeaseContext {
  environment: string;
  /** The fencing token: pass it with every write made under this lease. */
  generation: number;
  /** Aborts when a renewal fails or the lease is lost; the work should stop. */
  signal: AbortSignal;
  lease: Lease;
}

export interface WithLeaseOptions {
  ttlSeconds?: number;
  instance?: string;
  /** How often to renew (default: a third of the TTL). */
  renewEveryMs?: number;
  /**
   * Wait in the environment's lease queue (docs/leases.md) instead of failing with
   * LEASE_HELD; LeaseNotGrantedError when the ticket ends otherwise (EXPIRED after
   * maxWaitSeconds, SUPERSEDED by a newer one in LATEST mode, CANCELLED).
   */
  wait?: WaitOptions;
}

export interface WaitOptions {
  /** 1..86400 (default 600): the ticket turns EXPIRED if not granted by then. */
  maxWaitSeconds?: number;
  /** How often the ticket is read while it waits (default 500 ms). */
  pollMs?: number;
  /** Called with the ticket each time it is read while it still waits, and how long it has waited (ms). */
  onWait?: (ticket: LeaseTicket, waitedMs: number) => void;
}

export type LeaseTicketStatus = schema.LeaseTicketStatus;

/** A place in an environment's lease queue (docs/leases.md). */
export interface LeaseTicket {
  id: string;
  environment: string;
  holder: string;
  status: LeaseTicketStatus;
  /** 1-based place while WAITING. */
  position: number | null;
  /** The lease granted to it (GRANTED only). */
  lease: Lease | null;
  enqueuedAt: string;
  grantedAt: string | null;
  expiresAt: string;
}

/** The ticket ended without a grant: EXPIRED, SUPERSEDED or CANCELLED. */
export class LeaseNotGrantedError extends Error {
  constructor(readonly ticket: LeaseTicket) {
    super(`lease ticket ${ticket.id} on ${ticket.environment} ended ${ticket.status}`);
    this.name = 'LeaseNotGrantedError';
  }
}

const PLAN =
  'id environment generation sequence status title content contentHash submittedBy submittedAt basedOnPlanId reviewedBy reviewedAt rejectionReason publishedAt';
const TERRAFORM_PLAN = `${PLAN} contentType artifactHash basedOnDeploymentSequence sourceRevision
  priorState { lineage serial }
  summary { add change destroy replace read noop terraformVersion resourceChanges { address type actions before after sensitiveChanges }
    provisioners { address type command } }`;
/** The approval's fields in the contract, with their selections. */
const APPROVAL_FIELDS: Record<string, string> = {
  approver: '',
  at: '',
  contentHash: '',
  breakGlassReason: '',
  via: '',
  person: '{ issuer subject email name }',
};
/** Every field of the contract's Plan but `artifact` (see FullPlan), with their selections. */
const PLAN_FIELDS: Record<string, string> = {
  ...Object.fromEntries(
    `${PLAN} contentType artifactHash basedOnDeploymentSequence sourceRevision expiresAt purgedAt reviewUrl pendingChecks`
      .split(/\s+/)
      .map((name) => [name, '']),
  ),
  priorState: '{ lineage serial }',
  summary:
    '{ add change destroy replace read noop terraformVersion resourceChanges { address type actions before after sensitiveChanges } provisioners { address type command } }',
  approvals: '',
  pendingApprovalRules: '{ group count }',
  policyResults: '{ policy effect matched message error }',
  checks: '{ name status summary detailsUrl reportedBy at }',
};

/** A selection of the fields of `all` that `present` names (every one where it is null). */
function selection(all: Record<string, string>, present: Set<string> | null): string {
  return Object.entries(all)
    .filter(([name]) => !present || present.has(name))
    .map(([name, sub]) => `${name} ${sub}`.trim())
    .join(' ');
}
const LEASE = 'environment holder generation acquiredAt expiresAt';
const PRINCIPAL = 'name role createdAt revokedAt';
const TICKET = `id environment holder status position enqueuedAt grantedAt expiresAt lease { ${LEASE} }`;
const ENVIRONMENT = `name mode requireApproval fence lastIssuedGeneration createdAt deploymentSequence terraformState { lineage serial } lease { ${LEASE} } currentPlan { ${PLAN} }`;

/** R14: `count` approvers of `group` (any approver where null). */
export interface ApprovalRule {
  group: string | null;
  count: number;
}

export interface Approval {
  approver: string;
  at: string;
  contentHash: string;
  breakGlassReason: string | null;
}

/** A plan with its review: the approvals so far, the rules still unmet, when it expires. */
export interface ReviewedPlan extends Plan {
  approvals: Approval[];
  pendingApprovalRules: ApprovalRule[];
  expiresAt: string | null;
}

/** An environment's approval policy and freeze (docs/design.md §9), and its plan policies (§16). */
export interface EnvironmentPolicy {
  name: string;
  approvalRules: ApprovalRule[];
  proposalTtlSeconds: number | null;
  freeze: { reason: string; frozenBy: string; frozenAt: string } | null;
  planPolicies: PlanPolicy[];
  policyVersion: number;
}

/** One CEL plan policy (DESIGN §16). */
export interface PlanPolicy {
  name: string;
  expression: string;
  effect: 'DENY' | 'WARN' | 'REQUIRE_APPROVAL';
  message: string;
  group?: string | null;
  count?: number | null;
}

/** What one policy decided for one plan. */
export interface PolicyResult {
  policy: string;
  effect: PlanPolicy['effect'];
  matched: boolean;
  message: string | null;
  error: string | null;
}

const REVIEWED_PLAN = `${PLAN} approvals { approver at contentHash breakGlassReason } pendingApprovalRules { group count } expiresAt`;
const POLICY =
  'name approvalRules { group count } proposalTtlSeconds freeze { reason frozenBy frozenAt } policyVersion planPolicies { name expression effect message group count }';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A typed client for agents, reviewers and scripts.
 *
 * What it guarantees an agent: a plan keeps the generation it was made under; a retry
 * reuses the idempotency key of its logical attempt (so a lost answer never makes a
 * second plan); fencing rejections are thrown, never retried.
 */
export class PlanfenceClient {
  private readonly url: string;
  private readonly fetch: typeof fetch;
  private readonly retry: Required<RetryOptions>;

  constructor(private readonly options: ClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.fetch = options.fetch ?? fetch;
    this.retry = {
      attempts: 6,
      baseDelayMs: 100,
      maxDelayMs: 3000,
      maxRateLimitWaitMs: 30_000,
      ...options.retry,
    };
  }

  /**
   * One GraphQL operation. Throws a PlanfenceError subclass or a TransportError. A
   * RATE_LIMITED answer means the service ran nothing: the same operation (the same
   * variables, so the same idempotency key) is sent again after `retryAfterSeconds` plus
   * jitter, within `attempts` and `maxRateLimitWaitMs`.
   */
  async request<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.send<T>(query, variables);
      } catch (error) {
        if (!(error instanceof RateLimitedError) || attempt >= this.retry.attempts) throw error;
        const waitMs = Math.max(1, error.retryAfterSeconds) * 1000;
        if (waitMs > this.retry.maxRateLimitWaitMs) throw error;
        // Never earlier than asked; the jitter spreads clients that were refused together.
        await sleep(waitMs + Math.random() * waitMs * 0.1);
      }
    }
  }

  private async send<T>(query: string, variables: Record<string, unknown>): Promise<T> {
    let response: Response;
    try {
      response = await this.fetch(`${this.url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${this.options.token}`,
        },
        body: JSON.stringify({ query, variables }),
        ...(this.options.requestTimeoutMs
          ? { signal: AbortSignal.timeout(this.options.requestTimeoutMs) }
          : {}),
      });
    } catch (error) {
      throw new TransportError(`cannot reach ${this.url}: ${(error as Error).message}`);
    }
    let body: { data?: T; errors?: GraphQLErrorBody[] };
    try {
      body = (await response.json()) as typeof body;
    } catch {
      throw new TransportError(
        `${this.url} answered HTTP ${response.status} without a GraphQL body`,
        response.status,
      );
    }
    if (body.errors?.length) throw errorFromBody(body.errors[0]);
    if (response.status >= 500 || !body.data) {
      throw new TransportError(`${this.url} answered HTTP ${response.status}`, response.status);
    }
    return body.data;
  }

  whoami(): Promise<Principal> {
    return this.request<{ whoami: Principal }>(`{ whoami { ${PRINCIPAL} } }`).then((d) => d.whoami);
  }

  async issueToken(name: string, role: Role): Promise<{ principal: Principal; token: string }> {
    const data = await this.request<{ issueToken: { principal: Principal; token: string } }>(
      `mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token principal { ${PRINCIPAL} } } }`,
      { name, role },
    );
    return data.issueToken;
  }

  async revokeToken(name: string): Promise<Principal> {
    return (
      await this.request<{ revokeToken: Principal }>(
        `mutation($name: String!) { revokeToken(name: $name) { ${PRINCIPAL} } }`,
        { name },
      )
    ).revokeToken;
  }

  async createEnvironment(input: {
    name: string;
    mode?: FencingMode;
    requireApproval?: boolean;
  }): Promise<Environment> {
    return (
      await this.request<{ createEnvironment: Environment }>(
        `mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { ${ENVIRONMENT} } }`,
        { input },
      )
    ).createEnvironment;
  }

  async environments(): Promise<Environment[]> {
    return (
      await this.request<{ environments: Environment[] }>(`{ environments { ${ENVIRONMENT} } }`)
    ).environments;
  }

  async environment(name: string): Promise<Environment | null> {
    return (
      await this.request<{ environment: Environment | null }>(
        `query($name: String!) { environment(name: $name) { ${ENVIRONMENT} } }`,
        { name },
      )
    ).environment;
  }

  async acquireLease(
    environment: string,
    options: { ttlSeconds?: number; instance?: string } = {},
  ): Promise<Lease> {
    const input = { environment, ttlSeconds: options.ttlSeconds ?? 30, instance: options.instance };
    return (
      await this.request<{ acquireLease: Lease }>(
        `mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { ${LEASE} } }`,
        { input },
      )
    ).acquireLease;
  }

  /** A ticket in the environment's lease queue: GRANTED at once when it is free and nobody waits. QueueFullError. */
  async enqueueLease(
    environment: string,
    options: { ttlSeconds?: number; instance?: string; maxWaitSeconds?: number } = {},
  ): Promise<LeaseTicket> {
    const input = {
      environment,
      ttlSeconds: options.ttlSeconds ?? 30,
      instance: options.instance,
      maxWaitSeconds: options.maxWaitSeconds ?? 600,
    };
    return (
      await this.request<{ enqueueLease: LeaseTicket }>(
        `mutation($input: EnqueueLeaseInput!) { enqueueLease(input: $input) { ${TICKET} } }`,
        { input },
      )
    ).enqueueLease;
  }

  async leaseTicket(id: string): Promise<LeaseTicket | null> {
    return (
      await this.request<{ leaseTicket: LeaseTicket | null }>(
        `query($id: ID!) { leaseTicket(id: $id) { ${TICKET} } }`,
        { id },
      )
    ).leaseTicket;
  }

  async cancelLeaseTicket(id: string): Promise<LeaseTicket> {
    return (
      await this.request<{ cancelLeaseTicket: LeaseTicket }>(
        `mutation($id: ID!) { cancelLeaseTicket(id: $id) { ${TICKET} } }`,
        { id },
      )
    ).cancelLeaseTicket;
  }

  /**
   * Enqueues for the environment's lease and waits, reading the ticket every `pollMs`,
   * until it is granted (the lease is returned) or ends otherwise (LeaseNotGrantedError).
   * An aborted `signal` cancels the ticket.
   */
  async waitForLease(
    environment: string,
    options: { ttlSeconds?: number; instance?: string; signal?: AbortSignal } & WaitOptions = {},
  ): Promise<Lease> {
    const started = performance.now();
    let ticket = await this.enqueueLease(environment, options);
    const pollMs = options.pollMs ?? 500;
    while (ticket.status === 'WAITING') {
      options.onWait?.(ticket, performance.now() - started);
      if (options.signal?.aborted) {
        await this.cancelLeaseTicket(ticket.id).catch(() => undefined);
        throw options.signal.reason;
      }
      await sleep(pollMs);
      ticket = (await this.retrying(() => this.leaseTicket(ticket.id))) ?? ticket;
    }
    if (ticket.status !== 'GRANTED' || !ticket.lease) throw new LeaseNotGrantedError(ticket);
    return ticket.lease;
  }

  async renewLease(environment: string, generation: number, ttlSeconds = 30): Promise<Lease> {
    return (
      await this.request<{ renewLease: Lease }>(
        `mutation($input: RenewLeaseInput!) { renewLease(input: $input) { ${LEASE} } }`,
        { input: { environment, generation, ttlSeconds } },
      )
    ).renewLease;
  }

  async releaseLease(environment: string, generation: number): Promise<boolean> {
    return (
      await this.request<{ releaseLease: boolean }>(
        'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) }',
        { input: { environment, generation } },
      )
    ).releaseLease;
  }

  /**
   * Submits a plan made under `generation`. One idempotency key per call (or the one
   * given), reused on every retry of transport failures, 5xx answers and
   * IDEMPOTENCY_IN_PROGRESS, with bounded exponential back-off and jitter, and of
   * RATE_LIMITED after the wait the service names (see `request`). Fencing
   * rejections (STALE_GENERATION, ...) are thrown at once: a stale plan cannot be
   * refreshed by retrying, only remade under a new lease.
   */
  async submitPlan(input: {
    environment: string;
    generation: number;
    content: string;
    title?: string;
    basedOnPlanId?: string;
    idempotencyKey?: string;
  }): Promise<Plan> {
    const frozen = { ...input, idempotencyKey: input.idempotencyKey ?? randomUUID() };
    return this.retrying(
      async () =>
        (
          await this.request<{ submitPlan: Plan }>(
            `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${PLAN} } }`,
            { input: frozen },
          )
        ).submitPlan,
    );
  }

  /**
   * Submits the JSON of `terraform show -json PLANFILE` (TERRAFORM_PLAN_JSON) with the
   * binary plan file as its artifact. The service computes the summary and reads the state
   * the plan file was computed from (`priorState`, R56): a plan older than the state an
   * applier last reported is refused, at submit and after. `basedOnDeploymentSequence`
   * (optional) binds it to a deployment sequence as well (R33: published and deployed only
   * while the environment's sequence is still that). Retried like submitPlan.
   */
  async submitTerraformPlan(input: {
    environment: string;
    generation: number;
    /** The output of `terraform show -json PLANFILE`. */
    planJson: string;
    /** The binary plan file (`terraform plan -out PLANFILE`). */
    planFile?: Uint8Array;
    basedOnDeploymentSequence?: number;
    sourceRevision?: string;
    title?: string;
    basedOnPlanId?: string;
    idempotencyKey?: string;
  }): Promise<TerraformPlan> {
    const { planJson, planFile, ...rest } = input;
    const frozen = {
      ...rest,
      content: planJson,
      contentType: 'TERRAFORM_PLAN_JSON',
      artifact: planFile ? Buffer.from(planFile).toString('base64') : undefined,
      idempotencyKey: input.idempotencyKey ?? randomUUID(),
    };
    return this.retrying(
      async () =>
        (
          await this.request<{ submitPlan: TerraformPlan }>(
            `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${TERRAFORM_PLAN} } }`,
            { input: frozen },
          )
        ).submitPlan,
    );
  }

  /** A plan with its summary; with `artifact: true`, its artifact (base64) too. */
  async terraformPlan(
    id: string,
    options: { artifact?: boolean } = {},
  ): Promise<TerraformPlan | null> {
    return (
      await this.request<{ plan: TerraformPlan | null }>(
        `query($id: ID!) { plan(id: $id) { ${TERRAFORM_PLAN} ${options.artifact ? 'artifact' : ''} } }`,
        { id },
      )
    ).plan;
  }

  /**
   * Every field of the plan (FullPlan); with `artifact: true` its plan file too, which the
   * service gives DEPLOYER and ADMIN only (FORBIDDEN otherwise, R54). Null: no such plan.
   */
  async planInFull(id: string, options: { artifact?: boolean } = {}): Promise<FullPlan | null> {
    this.planFields ??= this.fieldsOf(['Plan', 'Approval']);
    const [plan, approval] = await this.planFields;
    const approvals = `approvals { ${selection(APPROVAL_FIELDS, approval)} }`;
    const fields = selection(PLAN_FIELDS, plan).replace(/\bapprovals\b/, approvals);
    return (
      await this.request<{ plan: FullPlan | null }>(
        `query($id: ID!) { plan(id: $id) { ${fields} ${options.artifact ? 'artifact' : ''} } }`,
        { id },
      )
    ).plan;
  }

  /** The fields of the contract's Plan (and Approval) that this service's schema has. */
  private planFields: Promise<(Set<string> | null)[]> | null = null;

  /**
   * The field names of each type in the service's schema (introspection), so that a service
   * older than the contract is still read in full; null for every type where introspection is
   * off (PLANFENCE_INTROSPECTION): then the contract's fields are asked for.
   */
  private async fieldsOf(types: string[]): Promise<(Set<string> | null)[]> {
    const query = `{ ${types.map((t, i) => `t${i}: __type(name: "${t}") { fields { name } }`).join(' ')} }`;
    try {
      const data = await this.request<Record<string, { fields: { name: string }[] } | null>>(query);
      return types.map((_, i) => {
        const type = data[`t${i}`];
        return type ? new Set(type.fields.map((f) => f.name)) : null;
      });
    } catch (error) {
      if (error instanceof TransportError) throw error;
      return types.map(() => null);
    }
  }

  /** The environment's deployment sequence: that of the last deployment started (0: none). */
  async deploymentSequence(environment: string): Promise<number> {
    const { environment: found } = await this.request<{
      environment: { deploymentSequence: number } | null;
    }>('query($e: String!) { environment(name: $e) { deploymentSequence } }', { e: environment });
    if (!found)
      throw errorFromBody({
        message: `environment "${environment}" does not exist`,
        extensions: { code: 'NOT_FOUND' },
      });
    return found.deploymentSequence;
  }

  async approvePlan(
    planId: string,
    options: { contentHash?: string; idempotencyKey?: string } = {},
  ): Promise<Plan> {
    const input = {
      planId,
      contentHash: options.contentHash,
      idempotencyKey: options.idempotencyKey ?? randomUUID(),
    };
    return this.retrying(
      async () =>
        (
          await this.request<{ approvePlan: Plan }>(
            `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN} } }`,
            { input },
          )
        ).approvePlan,
    );
  }

  async rejectPlan(
    planId: string,
    reason: string,
    options: { idempotencyKey?: string } = {},
  ): Promise<Plan> {
    const input = { planId, reason, idempotencyKey: options.idempotencyKey ?? randomUUID() };
    return this.retrying(
      async () =>
        (
          await this.request<{ rejectPlan: Plan }>(
            `mutation($input: RejectPlanInput!) { rejectPlan(input: $input) { ${PLAN} } }`,
            { input },
          )
        ).rejectPlan,
    );
  }

  async currentPlan(environment: string): Promise<Plan | null> {
    return (
      await this.request<{ currentPlan: Plan | null }>(
        `query($e: String!) { currentPlan(environment: $e) { ${PLAN} } }`,
        { e: environment },
      )
    ).currentPlan;
  }

  async plan(id: string): Promise<Plan | null> {
    return (
      await this.request<{ plan: Plan | null }>(`query($id: ID!) { plan(id: $id) { ${PLAN} } }`, {
        id,
      })
    ).plan;
  }

  async plans(
    environment: string,
    options: { status?: PlanStatus; first?: number; after?: string } = {},
  ): Promise<Plan[]> {
    return (
      await this.request<{ plans: Plan[] }>(
        `query($e: String!, $status: PlanStatus, $first: Int!, $after: ID) { plans(environment: $e, status: $status, first: $first, after: $after) { ${PLAN} } }`,
        {
          e: environment,
          status: options.status,
          first: options.first ?? 50,
          after: options.after,
        },
      )
    ).plans;
  }

  async auditEvents(
    environment: string,
    options: { first?: number; after?: string } = {},
  ): Promise<AuditEvent[]> {
    return (
      await this.request<{ auditEvents: AuditEvent[] }>(
        'query($e: String!, $first: Int!, $after: ID) { auditEvents(environment: $e, first: $first, after: $after) { id at environment actor action generation planId outcome code detail } }',
        { e: environment, first: options.first ?? 50, after: options.after },
      )
    ).auditEvents;
  }

  /** ADMIN: issues a token to a principal in `groups` (R14). */
  async issueTokenWithGroups(
    name: string,
    role: Role,
    groups: string[],
  ): Promise<{ principal: Principal & { groups: string[] }; token: string }> {
    const data = await this.request<{
      issueToken: { principal: Principal & { groups: string[] }; token: string };
    }>(
      `mutation($name: String!, $role: Role!, $groups: [String!]) { issueToken(name: $name, role: $role, groups: $groups) { token principal { ${PRINCIPAL} groups } } }`,
      { name, role, groups },
    );
    return data.issueToken;
  }

  /** ADMIN: replaces a principal's groups. */
  async setPrincipalGroups(
    name: string,
    groups: string[],
  ): Promise<Principal & { groups: string[] }> {
    return (
      await this.request<{ setPrincipalGroups: Principal & { groups: string[] } }>(
        `mutation($name: String!, $groups: [String!]!) { setPrincipalGroups(name: $name, groups: $groups) { ${PRINCIPAL} groups } }`,
        { name, groups },
      )
    ).setPrincipalGroups;
  }

  /** ADMIN: creates an environment with approval rules and a proposal TTL. */
  async createEnvironmentWithPolicy(input: {
    name: string;
    mode?: FencingMode;
    requireApproval?: boolean;
    approvalRules?: ApprovalRule[];
    proposalTtlSeconds?: number;
  }): Promise<EnvironmentPolicy> {
    return (
      await this.request<{ createEnvironment: EnvironmentPolicy }>(
        `mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { ${POLICY} } }`,
        { input },
      )
    ).createEnvironment;
  }

  /** The environment's approval rules, proposal TTL and freeze; null when it does not exist. */
  async policy(environment: string): Promise<EnvironmentPolicy | null> {
    return (
      await this.request<{ environment: EnvironmentPolicy | null }>(
        `query($name: String!) { environment(name: $name) { ${POLICY} } }`,
        { name: environment },
      )
    ).environment;
  }

  /**
   * ADMIN: new rules, TTL and/or plan policies (a null TTL: proposals stop expiring;
   * undefined: unchanged). Policies that do not parse or type-check: BadUserInputError
   * whose extensions name the policy and the error.
   */
  async updateEnvironmentPolicy(input: {
    environment: string;
    approvalRules?: ApprovalRule[];
    proposalTtlSeconds?: number | null;
    planPolicies?: PlanPolicy[];
  }): Promise<EnvironmentPolicy> {
    return (
      await this.request<{ updateEnvironmentPolicy: EnvironmentPolicy }>(
        `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { ${POLICY} } }`,
        { input },
      )
    ).updateEnvironmentPolicy;
  }

  /** REVIEWER, ADMIN: what the policies (given, or the environment's) decide for a document; nothing is stored. */
  async dryRunPlanPolicies(input: {
    environment: string;
    content: string;
    contentType?: 'TEXT' | 'TERRAFORM_PLAN_JSON';
    planPolicies?: PlanPolicy[];
  }): Promise<PolicyResult[]> {
    return (
      await this.request<{ dryRunPlanPolicies: PolicyResult[] }>(
        `query($env: String!, $policies: [PlanPolicyInput!], $content: String!, $type: PlanContentType!) {
           dryRunPlanPolicies(environment: $env, planPolicies: $policies, content: $content, contentType: $type) {
             policy effect matched message error } }`,
        {
          env: input.environment,
          policies: input.planPolicies ?? null,
          content: input.content,
          type: input.contentType ?? 'TEXT',
        },
      )
    ).dryRunPlanPolicies;
  }

  /** ADMIN: nothing is published in `environment` until unfrozen, but by break-glass. */
  async freezeEnvironment(environment: string, reason: string): Promise<EnvironmentPolicy> {
    return (
      await this.request<{ freezeEnvironment: EnvironmentPolicy }>(
        `mutation($e: String!, $r: String!) { freezeEnvironment(environment: $e, reason: $r) { ${POLICY} } }`,
        { e: environment, r: reason },
      )
    ).freezeEnvironment;
  }

  async unfreezeEnvironment(environment: string): Promise<EnvironmentPolicy> {
    return (
      await this.request<{ unfreezeEnvironment: EnvironmentPolicy }>(
        `mutation($e: String!) { unfreezeEnvironment(environment: $e) { ${POLICY} } }`,
        { e: environment },
      )
    ).unfreezeEnvironment;
  }

  /**
   * Approves and returns the plan with its review: PROPOSED with the rules still pending,
   * or PUBLISHED when this approval completed them. `breakGlassReason` (ADMIN only)
   * publishes despite a freeze and the rules. Retries like `approvePlan`; throws
   * AlreadyApprovedError, FrozenError, SelfApprovalError, StaleGenerationError, ...
   */
  async review(
    planId: string,
    options: { contentHash?: string; idempotencyKey?: string; breakGlassReason?: string } = {},
  ): Promise<ReviewedPlan> {
    const input = {
      planId,
      contentHash: options.contentHash,
      breakGlassReason: options.breakGlassReason,
      idempotencyKey: options.idempotencyKey ?? randomUUID(),
    };
    return this.retrying(
      async () =>
        (
          await this.request<{ approvePlan: ReviewedPlan }>(
            `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${REVIEWED_PLAN} } }`,
            { input },
          )
        ).approvePlan,
    );
  }

  /** PROPOSED plans the caller may approve now, across environments, oldest first. */
  async reviewQueue(first = 50): Promise<ReviewedPlan[]> {
    return (
      await this.request<{ reviewQueue: ReviewedPlan[] }>(
        `query($first: Int!) { reviewQueue(first: $first) { ${REVIEWED_PLAN} } }`,
        { first },
      )
    ).reviewQueue;
  }

  /**
   * Runs `work` under a lease: acquires it (or, with `wait`, waits its turn in the queue),
   * renews it in the background well before
   * it expires, and releases it as soon as `work` settles (a renewal due later is not waited
   * for: the next agent in the queue gets the lease at once). `work` gets the generation to send with its
   * writes and a signal that aborts when a renewal fails or the lease is lost (a pause
   * longer than the TTL, a network partition); from then on the service rejects the
   * generation's writes anyway, so the work should stop.
   */
  async withLease<T>(
    environment: string,
    work: (lease: LeaseContext) => Promise<T>,
    options: WithLeaseOptions = {},
  ): Promise<T> {
    const ttlSeconds = options.ttlSeconds ?? 30;
    const renewEveryMs = options.renewEveryMs ?? (ttlSeconds * 1000) / 3;
    const lease = options.wait
      ? await this.waitForLease(environment, {
          ttlSeconds,
          instance: options.instance,
          ...options.wait,
        })
      : await this.acquireLease(environment, { ttlSeconds, instance: options.instance });
    const controller = new AbortController();
    /** Aborted when the work ends: the renewals stop at once, and the lease is released. */
    const ended = new AbortController();
    const renewals = (async () => {
      // Judged on this process's monotonic clock: the service's timestamps are not compared with ours.
      let deadline = performance.now() + ttlSeconds * 1000;
      while (!ended.signal.aborted && !controller.signal.aborted) {
        // Node's timer, ended early (rejected) when the work ends.
        await wait(renewEveryMs, undefined, { signal: ended.signal }).catch(() => undefined);
        if (ended.signal.aborted) return;
        try {
          const started = performance.now();
          await this.renewLease(environment, lease.generation, ttlSeconds);
          deadline = started + ttlSeconds * 1000;
        } catch (error) {
          // A transport failure or a rate limit is retried until the lease would have expired;
          // a refusal is final.
          if (
            (error instanceof TransportError || error instanceof RateLimitedError) &&
            performance.now() < deadline - renewEveryMs
          )
            continue;
          controller.abort(
            error instanceof LeaseNotHeldError
              ? error
              : new LeaseNotHeldError({
                  message: `lease of generation ${lease.generation} lost: ${(error as Error).message}`,
                  extensions: { code: 'LEASE_NOT_HELD' },
                }),
          );
        }
      }
    })();
    try {
      return await work({
        environment,
        generation: lease.generation,
        signal: controller.signal,
        lease,
      });
    } finally {
      ended.abort();
      await renewals.catch(() => undefined);
      if (!controller.signal.aborted)
        await this.releaseLease(environment, lease.generation).catch(() => undefined);
    }
  }

  /**
   * Runs `call` again on transport failures and IDEMPOTENCY_IN_PROGRESS, within the
   * client's `retry` options, with full-jitter exponential back-off; anything else is
   * thrown. The call must reuse its idempotency key. The feature clients (deployments)
   * retry through this too.
   */
  async retrying<T>(call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (error) {
        const retryable =
          error instanceof TransportError || error instanceof IdempotencyInProgressError;
        if (!retryable || attempt >= this.retry.attempts) throw error;
        const ceiling = Math.min(
          this.retry.maxDelayMs,
          this.retry.baseDelayMs * 2 ** (attempt - 1),
        );
        await sleep(Math.random() * ceiling);
      }
    }
  }
}
