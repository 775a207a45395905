import { UseInterceptors } from '@nestjs/common';
import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { ScopedListInterceptor } from '../auth/scoped-list.interceptor.js';
import { TerraformState } from '../terraform/terraform-state.model.js';
import { Principal } from '../model/principal.entity.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { Lease } from '../leases/lease.model.js';
import { Plan } from '../model/plan.entity.js';
import { CreateEnvironmentInput } from './dto/create-environment.input.js';
import { EnvironmentArgs, EnvironmentNameArgs } from '../common/environment.args.js';
import { EnvironmentsPageArgs } from './dto/environments-page.args.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentsService, freezeOf, promotionOf } from './environments.service.js';
import { FreezeEnvironmentArgs, UpdateEnvironmentPolicyInput } from './dto/policy.inputs.js';
import { ApprovalRule, Freeze, Promotion } from './policy.model.js';

@Resolver(() => Environment)
export class EnvironmentsResolver {
  constructor(private readonly service: EnvironmentsService) {}

  /** All environments in name order; with `first`/`after`, one page of them. */
  @UseInterceptors(ScopedListInterceptor)
  @Query(() => [Environment], {
    description: 'In name order. Without arguments: all of them; first/after page through them.',
  })
  environments(@Args() { first, after }: EnvironmentsPageArgs): Promise<Environment[]> {
    return this.service.listPage(first ?? null, after ?? null);
  }

  @Query(() => Environment, { nullable: true })
  environment(@Args() { name }: EnvironmentNameArgs): Promise<Environment | null> {
    return this.service.find(name);
  }

  /** NOT_FOUND for an unknown environment; null while nothing is published. */
  @Query(() => Plan, { nullable: true })
  currentPlan(@Args() { environment }: EnvironmentArgs): Promise<Plan | null> {
    return this.service.currentPlan(environment);
  }

  /** ADMIN only. ALREADY_EXISTS when the name is taken (environments are never deleted). */
  @Roles()
  @Mutation(() => Environment)
  createEnvironment(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: CreateEnvironmentInput,
  ): Promise<Environment> {
    return this.service.create(principal.name, input);
  }

  @ResolveField('lease', () => Lease, {
    nullable: true,
    description: 'The live lease, if any (expired leases are null).',
  })
  lease(@Parent() env: Environment): Promise<Lease | null> {
    return this.service.lease(env);
  }

  @ResolveField('currentPlan', () => Plan, {
    nullable: true,
    description: 'The published plan: the one pointer that dashboards and deployers read.',
  })
  currentPlanOf(@Parent() env: Environment): Promise<Plan | null> {
    return this.service.plan(env.currentPlanId);
  }

  @ResolveField('terraformState', () => TerraformState, {
    nullable: true,
    description: 'The Terraform state last reported by an applier (DESIGN R56).',
  })
  terraformState(@Parent() env: Environment): TerraformState | null {
    return env.stateLineage != null && env.stateSerial != null
      ? { lineage: env.stateLineage, serial: env.stateSerial }
      : null;
  }

  /** ADMIN only. R15, R16: audited as UPDATE_POLICY. NOT_FOUND, BAD_USER_INPUT. */
  @Roles()
  @Mutation(() => Environment)
  updateEnvironmentPolicy(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: UpdateEnvironmentPolicyInput,
  ): Promise<Environment> {
    return this.service.updatePolicy(principal.name, input);
  }

  /** ADMIN only. R17: nothing is published until unfreeze, but by break-glass; audited as FREEZE. */
  @Roles()
  @Mutation(() => Environment)
  freezeEnvironment(
    @CurrentPrincipal() principal: Principal,
    @Args() { environment, reason }: FreezeEnvironmentArgs,
  ): Promise<Environment> {
    return this.service.freeze(principal.name, environment, reason);
  }

  /** ADMIN only. Audited as UNFREEZE; unfreezing an environment that is not frozen changes nothing. */
  @Roles()
  @Mutation(() => Environment)
  unfreezeEnvironment(
    @CurrentPrincipal() principal: Principal,
    @Args() { environment }: EnvironmentArgs,
  ): Promise<Environment> {
    return this.service.unfreeze(principal.name, environment);
  }

  @ResolveField('approvalRules', () => [ApprovalRule], {
    description: 'Every rule must be met by distinct approvers before a plan is published.',
  })
  approvalRules(@Parent() env: Environment): Promise<ApprovalRule[]> {
    return this.service.approvalRules(env.name);
  }

  @ResolveField('requiredChecks', () => [String], {
    description:
      'Checks whose latest result must be SUCCESS before a plan is published (DESIGN R50).',
  })
  requiredChecks(@Parent() env: Environment): Promise<string[]> {
    return this.service.requiredChecks(env.name);
  }

  @ResolveField('promotion', () => Promotion, {
    nullable: true,
    description: 'Set where plans must have succeeded upstream first (R51).',
  })
  promotion(@Parent() env: Environment): Promotion | null {
    return promotionOf(env);
  }

  @ResolveField('freeze', () => Freeze, {
    nullable: true,
    description: 'Set while publication is frozen.',
  })
  freeze(@Parent() env: Environment): Freeze | null {
    return freezeOf(env);
  }
}
