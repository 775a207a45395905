import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { InputError } from '../common/errors.js';
import { NAME_PATTERN } from '../common/validation.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, select } from '../database/database.js';
import { planActivation, type PlanFacts } from './activation.js';
import { PolicyEffect, type PlanPolicy, type PolicyResult } from './plan-policy.model.js';
import { decidePolicies, type PolicyDecision } from './policy-decision.js';
import { type Lane, PolicyEngine } from './policy-engine.js';
import { PlanContentType } from '../model/plan.entity.js';
import type { MaskedTerraformPlan, ParsedTerraformPlan } from '../terraform/terraform-plan.js';
import { TerraformParser } from '../terraform/terraform-parser.js';
import { PolicyError } from '../model/policy.errors.js';
import type { PlanPolicyInput } from './dto/plan-policy.input.js';

/** DESIGN §6: plan policies per environment, expression bytes, message characters. */
export const MAX_POLICIES = 20;
export const MAX_EXPRESSION_BYTES = 4096;
export const MAX_MESSAGE_CHARS = 1024;

/** At most this many environments' policies are remembered for `decide` (the oldest go first). */
const REMEMBERED_ENVIRONMENTS = 10_000;

/** The parser's `<input>:LINE:COLUMN: message` as the checker says it. */
function parseErrorText(error: string): string {
  const match = /^<input>:(\d+):(\d+): ([\s\S]*)$/.exec(error);
  const text = match ? `line ${match[1]}, column ${match[2]}: ${match[3]}` : error;
  return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}

/**
 * Plan policies (DESIGN §16): saved only once every expression parses and type-checks,
 * evaluated off the request thread (PolicyEngine), decided fail-closed (decidePolicies).
 */
@Injectable()
export class PoliciesService implements OnModuleDestroy {
  /**
   * Each environment's policies and policy version as `decide` last read them. A submit is
   * decided only while the version its policies were evaluated at is still the
   * environment's (R34; else PolicyVersionChanged, and the submitter calls `forget` and
   * evaluates again), the version grows with every change and environments are never
   * deleted: an entry another instance's change made stale costs one evaluation again, never
   * a decision by old policies. It saves a submit a database read (a round trip on PostgreSQL).
   */
  private readonly remembered = new Map<string, { version: number; policies: PlanPolicy[] }>();

  /**
   * Terraform plan documents are parsed, summarised and masked on worker threads (R31, R54),
   * bounded by PLANFENCE_TERRAFORM_PARSE_BUDGET_MS of the worker's time each: submits on their
   * own workers, dry runs on one of their own.
   */
  private readonly terraform: Record<Lane, TerraformParser>;

  constructor(
    private readonly db: Database,
    private readonly engine: PolicyEngine,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    const options = {
      budgetMs: config.policies.terraformBudgetMs,
      budgetVariable: 'PLANFENCE_TERRAFORM_PARSE_BUDGET_MS',
    };
    this.terraform = {
      submit: new TerraformParser({ ...options, workers: config.policies.workers }),
      trial: new TerraformParser({ ...options, workers: 1 }),
    };
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([this.terraform.submit.close(), this.terraform.trial.close()]);
  }

  /**
   * `parseTerraformPlan(content)` off the request thread: the summary, the masked document
   * and content (R31, R54); BAD_USER_INPUT for a document that is not a plan, or
   * BAD_USER_INPUT {limit: "terraformParseMs"} for one that takes longer than its budget.
   */
  parseTerraform(content: string, lane?: Lane, whole?: true): Promise<ParsedTerraformPlan>;
  parseTerraform(content: string, lane: Lane, whole: false): Promise<MaskedTerraformPlan>;
  parseTerraform(
    content: string,
    lane: Lane = 'submit',
    whole = true,
  ): Promise<ParsedTerraformPlan | MaskedTerraformPlan> {
    return whole ? this.terraform[lane].parse(content) : this.terraform[lane].parse(content, false);
  }

  /**
   * Whether `environment` has plan policies now (as `decide` will read them, unless its
   * version moves on meanwhile): a submit's parse then keeps the document for them.
   */
  async hasPolicies(environment: string): Promise<boolean> {
    return (await this.current(environment)).policies.length > 0;
  }

  /**
   * The policies as they will be stored, or BAD_USER_INPUT {policy, error} for the first
   * one that breaks a limit, does not parse or does not type-check (with the position).
   */
  async validate(inputs: readonly PlanPolicyInput[]): Promise<PlanPolicy[]> {
    if (inputs.length > MAX_POLICIES) {
      throw PolicyError.invalid(null, `planPolicies must hold 0 to ${MAX_POLICIES} policies`);
    }
    const names = new Set<string>();
    const policies: PlanPolicy[] = [];
    for (const input of inputs) {
      const fail = (error: string): never => {
        throw PolicyError.invalid(input.name, error);
      };
      if (!NAME_PATTERN.test(input.name)) fail('name must match ^[a-z0-9][a-z0-9._-]{0,62}$');
      if (names.has(input.name)) fail(`the name ${input.name} is used by two policies`);
      names.add(input.name);
      const bytes = Buffer.byteLength(input.expression, 'utf8');
      if (bytes < 1 || bytes > MAX_EXPRESSION_BYTES) {
        fail(`expression must be 1 to ${MAX_EXPRESSION_BYTES} bytes (got ${bytes})`);
      }
      if (input.message.length < 1 || input.message.length > MAX_MESSAGE_CHARS) {
        fail(`message must be 1 to ${MAX_MESSAGE_CHARS} characters long`);
      }
      let group: string | null = null;
      let count: number | null = null;
      if (input.effect === PolicyEffect.REQUIRE_APPROVAL) {
        group = input.group ?? null;
        count = input.count ?? 1;
        if (group !== null && !NAME_PATTERN.test(group)) {
          fail('group must match ^[a-z0-9][a-z0-9._-]{0,62}$');
        }
        if (!Number.isInteger(count) || count < 1 || count > 10) fail('count must be 1 to 10');
      } else if (input.group != null || input.count != null) {
        fail('group and count belong to REQUIRE_APPROVAL policies only');
      }
      await this.checkExpression(input.name, input.expression);
      policies.push({
        name: input.name,
        expression: input.expression,
        effect: input.effect,
        message: input.message,
        group,
        count,
      });
    }
    return policies;
  }

  private async checkExpression(policy: string, expression: string): Promise<void> {
    const parsed = await this.engine.parse(expression);
    if ('error' in parsed) throw PolicyError.invalid(policy, parseErrorText(parsed.error));
    // Loaded on the first check: the CEL runtime the checker builds on stays out of the
    // request thread's heap until someone saves or tries policies (about 5 MiB).
    const { CheckError, checkPolicyExpression, positionOf } = await import('./cel-checker.js');
    try {
      checkPolicyExpression(parsed.ast.expr, parsed.ast.sourceInfo);
    } catch (error) {
      if (!(error instanceof CheckError)) throw error;
      throw PolicyError.invalid(
        policy,
        `${positionOf(error.offset, parsed.ast.sourceInfo?.lineOffsets)}: ${error.message}`,
      );
    }
  }

  /** An environment's policies in order, and its policy version (0 and none for an unknown one). */
  policiesOf(environment: string): Promise<{ version: number; policies: PlanPolicy[] }> {
    return this.db.read((m) => policiesOf(m, environment));
  }

  /** A principal's groups, as a policy sees `plan.submitterGroups`. */
  groupsOf(principal: string): Promise<string[]> {
    return this.db.read(async (m) =>
      (
        await select<{ group_name: string }>(
          m,
          'SELECT group_name FROM principal_groups WHERE principal = :principal ORDER BY group_name',
          { principal },
        )
      ).map((row) => row.group_name),
    );
  }

  /**
   * R34: evaluates the environment's current policies for one plan (the submitter's groups
   * are read only where there are policies to read them).
   */
  async decide(facts: Omit<PlanFacts, 'submitterGroups'>): Promise<PolicyDecision> {
    const { version, policies } = await this.current(facts.environment);
    if (!policies.length) return decidePolicies(version, [], []);
    const submitterGroups = await this.groupsOf(facts.submitter);
    return this.evaluate(version, policies, { ...facts, submitterGroups });
  }

  /** An environment's policies as remembered since they were last read (`forget`). */
  private async current(environment: string): Promise<{ version: number; policies: PlanPolicy[] }> {
    let read = this.remembered.get(environment);
    if (!read) {
      read = await this.policiesOf(environment);
      if (this.remembered.size >= REMEMBERED_ENVIRONMENTS)
        this.remembered.delete(this.remembered.keys().next().value as string);
      this.remembered.set(environment, read);
    }
    return read;
  }

  /** Drops what `decide` remembered of an environment's policies: its version moved on. */
  forget(environment: string): void {
    this.remembered.delete(environment);
  }

  async evaluate(
    version: number,
    policies: readonly PlanPolicy[],
    facts: PlanFacts,
    lane: Lane = 'submit',
  ): Promise<PolicyDecision> {
    if (!policies.length) return decidePolicies(version, [], []);
    // The activation reads the parsed document: parsed on a worker when the caller has none.
    const parsed =
      facts.parsed ??
      (facts.contentType === PlanContentType.TERRAFORM_PLAN_JSON
        ? await this.parseTerraform(facts.content, lane)
        : null);
    const activation = planActivation({ ...facts, parsed });
    const outcomes = await this.engine.evaluate(
      policies.map((policy) => policy.expression),
      activation,
      lane,
    );
    return decidePolicies(version, policies, outcomes);
  }

  /** What the policies (given, or the environment's) decide for a document; nothing is stored. */
  async dryRun(
    facts: PlanFacts,
    inputs: readonly PlanPolicyInput[] | null | undefined,
  ): Promise<PolicyResult[]> {
    const bytes = Buffer.byteLength(facts.content, 'utf8');
    if (bytes > this.config.maxPlanBytes) {
      throw new InputError(
        'PAYLOAD_TOO_LARGE',
        `plan content is ${bytes} bytes; the limit is ${this.config.maxPlanBytes} (PLANFENCE_MAX_PLAN_BYTES)`,
      );
    }
    const { version, policies } = inputs
      ? { version: 0, policies: await this.validate(inputs) }
      : await this.policiesOf(facts.environment);
    return (await this.evaluate(version, policies, facts, 'trial')).results;
  }
}

/** The environment's policy version and its policies in order, read in one statement. */
export async function policiesOf(
  m: EntityManager,
  environment: string,
): Promise<{ version: number; policies: PlanPolicy[] }> {
  const rows = await select<{
    policy_version: number | string;
    name: string | null;
    expression: string;
    effect: PolicyEffect;
    message: string;
    group_name: string | null;
    required_count: number | string | null;
  }>(
    m,
    `SELECT e.policy_version, p.name, p.expression, p.effect, p.message, p.group_name,
       p.required_count
     FROM environments e LEFT JOIN plan_policies p ON p.environment = e.name
     WHERE e.name = :environment ORDER BY p.position`,
    { environment },
  );
  if (!rows.length) return { version: 0, policies: [] };
  return {
    version: Number(rows[0].policy_version),
    // An environment without policies reads as one row without a policy.
    policies: rows
      .filter((row) => row.name !== null)
      .map((row) => ({
        name: row.name!,
        expression: row.expression,
        effect: row.effect,
        message: row.message,
        group: row.group_name,
        count: row.required_count == null ? null : Number(row.required_count),
      })),
  };
}
