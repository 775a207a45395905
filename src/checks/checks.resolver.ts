import { Args, Mutation, Parent, ResolveField, Resolver } from '@nestjs/graphql';
import { Principal } from '../model/principal.entity.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { Role } from '../common/role.js';
import { Plan } from '../model/plan.entity.js';
import { CheckResult } from './check-result.model.js';
import { ChecksService } from './checks.service.js';
import { ReportCheckInput } from './dto/report-check.input.js';

@Resolver(() => Plan)
export class ChecksResolver {
  constructor(private readonly service: ChecksService) {}

  /**
   * R50: CHECKER (or ADMIN). INVALID_PLAN_STATE {status} once the plan is decided; a report
   * that completes what publication needs publishes the plan, or is refused with why it
   * cannot be published now (FROZEN, PRECONDITION_FAILED {reason}, STALE_GENERATION).
   */
  @Roles(Role.CHECKER)
  @Mutation(() => Plan, { description: 'CHECKER (or ADMIN). Refused once the plan is decided.' })
  reportCheck(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: ReportCheckInput,
  ): Promise<Plan> {
    return this.service.report(principal, input);
  }

  @ResolveField('checks', () => [CheckResult], {
    description: 'Latest result of each check reported on this plan (DESIGN R50).',
  })
  checks(@Parent() plan: Plan): Promise<CheckResult[]> {
    return this.service.results(plan);
  }

  @ResolveField('pendingChecks', () => [String], {
    description: 'Required checks whose latest result is not SUCCESS.',
  })
  pendingChecks(@Parent() plan: Plan): Promise<string[]> {
    return this.service.pending(plan);
  }
}
