import { Args, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { Database, select } from '../database/database.js';
import { findOne } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { Plan } from '../model/plan.entity.js';
import { DryRunPlanPoliciesArgs } from './dto/plan-policy.input.js';
import { PlanPolicy, PolicyResult } from './plan-policy.model.js';
import { PoliciesService } from './policies.service.js';

@Resolver(() => Environment)
export class EnvironmentPoliciesResolver {
  constructor(private readonly service: PoliciesService) {}

  @ResolveField('planPolicies', () => [PlanPolicy], {
    description: 'Evaluated on every submit, in order (DESIGN §16).',
  })
  async planPolicies(@Parent() env: Environment): Promise<PlanPolicy[]> {
    return (await this.service.policiesOf(env.name)).policies;
  }
}

@Resolver(() => Plan)
export class PlanPoliciesResolver {
  constructor(private readonly db: Database) {}

  @ResolveField('policyResults', () => [PolicyResult], {
    description:
      "The environment's policies as evaluated at submit (DENY results never appear: such plans are not stored).",
  })
  async policyResults(@Parent() plan: Plan): Promise<PolicyResult[]> {
    // A plan that travelled without its results (a subscription event) is read by id.
    if (plan.policyResults !== undefined) return plan.policyResults ?? [];
    const [stored] = await this.db.read((m) =>
      select<{ policy_results: string | null }>(
        m,
        'SELECT policy_results FROM plans WHERE id = :id',
        { id: plan.id },
      ),
    );
    return stored?.policy_results ? (JSON.parse(stored.policy_results) as PolicyResult[]) : [];
  }
}

@Resolver()
export class PoliciesResolver {
  constructor(
    private readonly service: PoliciesService,
    private readonly db: Database,
  ) {}

  /**
   * REVIEWER and ADMIN: what the policies (given, or the environment's) decide for a
   * document, as if the caller submitted it now; nothing is stored. BAD_USER_INPUT for
   * policies that could not be saved, PAYLOAD_TOO_LARGE, NOT_FOUND.
   */
  @Roles(Role.REVIEWER)
  @Query(() => [PolicyResult], {
    description:
      "REVIEWER and ADMIN: evaluates policies (the environment's, or the given ones) on a document without storing anything.",
  })
  async dryRunPlanPolicies(
    @CurrentPrincipal() principal: Principal,
    @Args() args: DryRunPlanPoliciesArgs,
  ): Promise<PolicyResult[]> {
    const env = await this.db.read((m) => findOne(m, Environment, { name: args.environment }));
    if (!env) throw EnvironmentError.notFound(args.environment);
    return this.service.dryRun(
      {
        environment: env.name,
        generation: 0,
        title: null,
        content: args.content,
        contentType: args.contentType,
        submitter: principal.name,
        submitterGroups: await this.service.groupsOf(principal.name),
      },
      args.planPolicies,
    );
  }
}
