import DataLoader from 'dataloader';
import { Injectable } from '@nestjs/common';
import type { Principal } from '../model/principal.entity.js';
import { tokenCheckOf } from '../auth/principal-memory.js';
import { PlanId } from '../common/ids.js';
import { READ_TOGETHER } from '../common/read-together.js';
import { Database, select } from '../database/database.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { PlanWrites } from '../fencing/plan-writes.js';
import { type Plan, PlanStatus } from '../model/plan.entity.js';
import { CheckResult, CheckStatus } from './check-result.model.js';
import type { ReportCheckInput } from './dto/report-check.input.js';

type CheckRow = {
  plan_id: string;
  name: string;
  status: CheckStatus;
  summary: string | null;
  details_url: string | null;
  reported_by: string;
  at: number | string;
};

/** Values in a statement's IN list: one parameter each. */
function inList(prefix: string, values: readonly string[]): [string, Record<string, string>] {
  const names = values.map((_, i) => `${prefix}${i}`);
  return [
    names.map((name) => `:${name}`).join(', '),
    Object.fromEntries(names.map((name, i) => [name, values[i]])),
  ];
}

/**
 * Required checks (DESIGN R50): the reports of CHECKERs, decided by the guard
 * (PlanWrites.reportCheck), and the reads of a plan's results and pending checks.
 */
@Injectable()
export class ChecksService {
  /** The results of the plans a list shows, read in one statement (as approvals are). */
  private readonly resultsLoader = new DataLoader<string, CheckResult[]>(
    (ids) => this.db.read((m) => this.resultsOf(m, ids)),
    READ_TOGETHER,
  );
  private readonly pendingLoader = new DataLoader<Plan, string[]>(
    (plans) => this.db.read((m) => this.pendingOf(m, plans)),
    READ_TOGETHER,
  );

  constructor(
    private readonly db: Database,
    private readonly decisions: DecisionRunner,
    private readonly writes: PlanWrites,
  ) {}

  /** R50: audited as REPORT_CHECK (with the name, status and whether it published). */
  report(principal: Principal, input: ReportCheckInput): Promise<Plan> {
    const { environment, generation } = PlanId.of(input.planId);
    return this.decisions.decidePlan(
      {
        action: 'REPORT_CHECK',
        environment,
        actor: principal.name,
        generation,
        planId: input.planId,
        token: tokenCheckOf(principal),
      },
      null,
      (tx) =>
        this.writes.reportCheck(tx, {
          planId: input.planId,
          name: input.name,
          status: input.status,
          summary: input.summary ?? null,
          detailsUrl: input.detailsUrl ?? null,
          reporter: principal.name,
          now: tx.now,
        }),
      (plan) =>
        `check ${input.name} ${input.status}${input.summary ? `: ${input.summary}` : ''}${
          plan.status === PlanStatus.PUBLISHED ? '; published' : ''
        }`,
    );
  }

  results(plan: Plan): Promise<CheckResult[]> {
    return this.resultsLoader.load(plan.id);
  }

  /** R50: required checks whose latest result is not SUCCESS; none once the plan is decided. */
  pending(plan: Plan): Promise<string[]> {
    return this.pendingLoader.load(plan);
  }

  private async resultsOf(
    m: Parameters<Parameters<Database['read']>[0]>[0],
    ids: readonly string[],
  ): Promise<CheckResult[][]> {
    const [list, params] = inList('id', ids);
    const rows = await select<CheckRow>(
      m,
      `SELECT plan_id, name, status, summary, details_url, reported_by, at FROM check_results
       WHERE plan_id IN (${list}) ORDER BY plan_id, name`,
      params,
    );
    return ids.map((id) =>
      rows
        .filter((row) => row.plan_id === id)
        .map((row) => ({
          name: row.name,
          status: row.status,
          summary: row.summary,
          detailsUrl: row.details_url,
          reportedBy: row.reported_by,
          at: new Date(Number(row.at)),
        })),
    );
  }

  private async pendingOf(
    m: Parameters<Parameters<Database['read']>[0]>[0],
    plans: readonly Plan[],
  ): Promise<string[][]> {
    const [list, params] = inList('id', [...new Set(plans.map((plan) => plan.id))]);
    const rows = await select<{ id: string; name: string }>(
      m,
      `SELECT p.id AS id, rc.name AS name FROM plans p
       JOIN required_checks rc ON rc.environment = p.environment
       WHERE p.id IN (${list})
         AND NOT EXISTS (SELECT 1 FROM check_results cr WHERE cr.plan_id = p.id
           AND cr.name = rc.name AND cr.status = 'SUCCESS')
       ORDER BY p.id, rc.position`,
      params,
    );
    return plans.map((plan) =>
      plan.status === PlanStatus.PROPOSED
        ? rows.filter((row) => row.id === plan.id).map((row) => row.name)
        : [],
    );
  }
}
