import type { FullPlan, PlanfenceClient } from './client.js';

/*
 * Preconditions beyond approval (DESIGN §22): check results on plans (R50), an environment's
 * required checks, promotion and deploy window (R50–R52), and drift (R53).
 */

export type CheckStatus = 'PENDING' | 'SUCCESS' | 'FAILURE';

/** A plan after a check report: its status (PUBLISHED when the report completed it) and checks. */
export interface CheckedPlan {
  id: string;
  environment: string;
  status: FullPlan['status'];
  sourceRevision: string | null;
  publishedAt: string | null;
  pendingChecks: string[];
  checks: NonNullable<FullPlan['checks']>;
}

/** An environment's preconditions (R50–R53). */
export interface EnvironmentPreconditions {
  name: string;
  requiredChecks: string[];
  promotion: { from: string; soakMinutes: number } | null;
  deployWithinMinutes: number | null;
  deploymentSequence: number;
  driftReportedAt: string | null;
}

const CHECKED_PLAN = `id environment status sourceRevision publishedAt pendingChecks
  checks { name status summary detailsUrl reportedBy at }`;
const PRECONDITIONS = `name requiredChecks promotion { from soakMinutes } deployWithinMinutes
  deploymentSequence driftReportedAt`;

/**
 * `new Checks(client)`: what a CHECKER (a CI job, a scanner) and an ADMIN do about
 * preconditions. Refusals are thrown (PlanfenceError subclasses), never retried: a report
 * that published the plan is not sent twice.
 */
export class Checks {
  constructor(private readonly client: PlanfenceClient) {}

  /**
   * CHECKER (or ADMIN): records `status` as the latest result of check `name` on the plan.
   * The SUCCESS that completes what publication needs publishes it (the returned plan reads
   * PUBLISHED). InvalidPlanStateError once the plan is decided.
   */
  async report(
    planId: string,
    name: string,
    status: CheckStatus,
    options: { summary?: string; detailsUrl?: string } = {},
  ): Promise<CheckedPlan> {
    const input = {
      planId,
      name,
      status,
      summary: options.summary,
      detailsUrl: options.detailsUrl,
    };
    return (
      await this.client.request<{ reportCheck: CheckedPlan }>(
        `mutation($input: ReportCheckInput!) { reportCheck(input: $input) { ${CHECKED_PLAN} } }`,
        { input },
      )
    ).reportCheck;
  }

  /** DEPLOYER or CHECKER: drift seen in `environment`; every plan made before it is stale (R53). */
  async reportDrift(environment: string, detail: string): Promise<EnvironmentPreconditions> {
    return (
      await this.client.request<{ reportDrift: EnvironmentPreconditions }>(
        `mutation($e: String!, $d: String!) { reportDrift(environment: $e, detail: $d) { ${PRECONDITIONS} } }`,
        { e: environment, d: detail },
      )
    ).reportDrift;
  }

  /** The environment's preconditions, or null when it does not exist. */
  async preconditions(environment: string): Promise<EnvironmentPreconditions | null> {
    return (
      await this.client.request<{ environment: EnvironmentPreconditions | null }>(
        `query($e: String!) { environment(name: $e) { ${PRECONDITIONS} } }`,
        { e: environment },
      )
    ).environment;
  }

  /**
   * ADMIN: sets what is given (undefined: unchanged): the required checks (replaced), the
   * promotion (null removes it), the deploy window in minutes (null removes it).
   */
  async configure(
    environment: string,
    settings: {
      requiredChecks?: string[];
      promotion?: { from: string; soakMinutes: number } | null;
      deployWithinMinutes?: number | null;
    },
  ): Promise<EnvironmentPreconditions> {
    const input = {
      environment,
      requiredChecks: settings.requiredChecks,
      promotion: settings.promotion ?? undefined,
      clearPromotion: settings.promotion === null ? true : undefined,
      deployWithinMinutes: settings.deployWithinMinutes === null ? 0 : settings.deployWithinMinutes,
    };
    return (
      await this.client.request<{ updateEnvironmentPolicy: EnvironmentPreconditions }>(
        `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { ${PRECONDITIONS} } }`,
        { input },
      )
    ).updateEnvironmentPolicy;
  }
}
