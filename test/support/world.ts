import { ADMIN_TOKEN, codeOf, type GqlResult, ok, type TestApp } from './app.js';

const PLAN_FIELDS =
  'id environment generation sequence status title content contentHash submittedBy basedOnPlanId reviewedBy rejectionReason publishedAt';

export interface Plan {
  id: string;
  environment: string;
  generation: number;
  sequence: number;
  status: string;
  title: string | null;
  content: string;
  contentHash: string;
  submittedBy: string;
  basedOnPlanId: string | null;
  reviewedBy: string | null;
  rejectionReason: string | null;
  publishedAt: string | null;
}

export interface EnvironmentState {
  name: string;
  mode: string;
  requireApproval: boolean;
  fence: number;
  lastIssuedGeneration: number;
  lease: { holder: string; generation: number; expiresAt: string } | null;
  currentPlan: { id: string; generation: number; sequence: number } | null;
}

let keys = 0;
export const freshKey = () => `key-${process.pid}-${++keys}`;

/** The people and programs around one running service, speaking GraphQL over HTTP. */
export class World {
  readonly admin = ADMIN_TOKEN;
  constructor(readonly app: TestApp) {}

  gql<T = Record<string, any>>(
    token: string | null,
    query: string,
    variables?: Record<string, unknown>,
  ) {
    return this.app.gql<T>(token, query, variables);
  }

  async issue(
    name: string,
    role: 'ADMIN' | 'AGENT' | 'REVIEWER' | 'DEPLOYER' | 'VIEWER' | 'CHECKER',
  ): Promise<string> {
    const result = await this.gql<{ issueToken: { token: string } }>(
      this.admin,
      'mutation($name: String!, $role: Role!) { issueToken(name: $name, role: $role) { token } }',
      { name, role },
    );
    return ok(result).issueToken.token;
  }

  async createEnvironment(
    name: string,
    mode: 'MONOTONIC' | 'STRICT',
    requireApproval = true,
  ): Promise<void> {
    ok(
      await this.gql(
        this.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        { input: { name, mode, requireApproval } },
      ),
    );
  }

  acquireRaw(token: string, environment: string, ttlSeconds = 30, instance?: string) {
    return this.gql<{
      acquireLease: { generation: number; holder: string; expiresAt: string; acquiredAt: string };
    }>(
      token,
      'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation holder expiresAt acquiredAt environment } }',
      { input: { environment, ttlSeconds, instance } },
    );
  }

  /** Acquires a lease and returns its generation. */
  async acquire(token: string, environment: string, ttlSeconds = 30): Promise<number> {
    return ok(await this.acquireRaw(token, environment, ttlSeconds)).acquireLease.generation;
  }

  renew(token: string, environment: string, generation: number, ttlSeconds = 30) {
    return this.gql<{ renewLease: { generation: number; expiresAt: string } }>(
      token,
      'mutation($input: RenewLeaseInput!) { renewLease(input: $input) { generation expiresAt } }',
      { input: { environment, generation, ttlSeconds } },
    );
  }

  release(token: string, environment: string, generation: number) {
    return this.gql<{ releaseLease: boolean }>(
      token,
      'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) }',
      { input: { environment, generation } },
    );
  }

  submit(
    token: string,
    environment: string,
    generation: number,
    content: string,
    extra: {
      idempotencyKey?: string;
      title?: string;
      basedOnPlanId?: string;
      sourceRevision?: string;
    } = {},
  ): Promise<GqlResult<{ submitPlan: Plan }>> {
    return this.gql(
      token,
      `mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { ${PLAN_FIELDS} } }`,
      {
        input: {
          environment,
          generation,
          content,
          idempotencyKey: extra.idempotencyKey ?? freshKey(),
          ...extra,
        },
      },
    );
  }

  async submitOk(
    token: string,
    environment: string,
    generation: number,
    content: string,
    extra = {},
  ): Promise<Plan> {
    return ok(await this.submit(token, environment, generation, content, extra)).submitPlan;
  }

  approve(
    token: string,
    planId: string,
    extra: {
      contentHash?: string;
      idempotencyKey?: string;
      breakGlassReason?: string;
      deploymentSequence?: number;
    } = {},
  ) {
    return this.gql<{ approvePlan: Plan }>(
      token,
      `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { ${PLAN_FIELDS} } }`,
      { input: { planId, ...extra } },
    );
  }

  reject(token: string, planId: string, reason: string, extra: { idempotencyKey?: string } = {}) {
    return this.gql<{ rejectPlan: Plan }>(
      token,
      `mutation($input: RejectPlanInput!) { rejectPlan(input: $input) { ${PLAN_FIELDS} } }`,
      { input: { planId, reason, ...extra } },
    );
  }

  async environment(name: string): Promise<EnvironmentState> {
    const result = await this.gql<{ environment: EnvironmentState }>(
      this.admin,
      `query($name: String!) { environment(name: $name) { name mode requireApproval fence lastIssuedGeneration
         lease { holder generation expiresAt } currentPlan { id generation sequence } } }`,
      { name },
    );
    return ok(result).environment;
  }

  async plan(id: string): Promise<Plan | null> {
    return ok(
      await this.gql<{ plan: Plan | null }>(
        this.admin,
        `query($id: ID!) { plan(id: $id) { ${PLAN_FIELDS} } }`,
        { id },
      ),
    ).plan;
  }

  async plans(environment: string, status?: string): Promise<Plan[]> {
    const result = await this.gql<{ plans: Plan[] }>(
      this.admin,
      `query($environment: String!, $status: PlanStatus) { plans(environment: $environment, status: $status, first: 500) { ${PLAN_FIELDS} } }`,
      { environment, status },
    );
    return ok(result).plans;
  }

  async auditEvents(environment: string, first = 500) {
    const result = await this.gql<{
      auditEvents: {
        id: string;
        action: string;
        outcome: string;
        code: string | null;
        generation: number | null;
        planId: string | null;
        actor: string;
      }[];
    }>(
      this.admin,
      'query($environment: String!, $first: Int!) { auditEvents(environment: $environment, first: $first) { id action outcome code generation planId actor detail at } }',
      { environment, first },
    );
    return ok(result).auditEvents;
  }

  /** Lets `seconds` pass on the service's clock. */
  advance(seconds: number): void {
    this.app.clock.advance(seconds * 1000);
  }
}

export { codeOf, ok };
export type { GqlResult };
