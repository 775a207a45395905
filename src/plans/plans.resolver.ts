import {
  Args,
  Context,
  Mutation,
  Parent,
  Query,
  ResolveField,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import { UseInterceptors } from '@nestjs/common';
import { SubscriptionFeeds, type SubscriptionCall } from '../events/feeds.js';
import { PlanPublishedArgs } from '../events/subscription.args.js';
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles, TokenCheckedInDecision } from '../auth/roles.decorator.js';
import {
  ApprovePlanInput,
  PlanArgs,
  PlansArgs,
  RejectPlanInput,
  ReviewQueueArgs,
  SubmitPlanInput,
} from './dto/plan.inputs.js';
import { ApprovalRule } from '../environments/policy.model.js';
import { Approval } from './approval.model.js';
import { Plan, PlanStatus } from '../model/plan.entity.js';
import { PlansService } from './plans.service.js';
import { PlanSummary } from '../terraform/plan-summary.model.js';
import { TerraformState } from '../terraform/terraform-state.model.js';
import { AuthError } from '../auth/auth.errors.js';
import { ScopedListInterceptor } from '../auth/scoped-list.interceptor.js';
import { reviewUrl } from './review-url.js';

@Resolver(() => Plan)
export class PlansResolver {
  constructor(
    private readonly service: PlansService,
    private readonly feeds: SubscriptionFeeds,
  ) {}

  @Query(() => Plan, { nullable: true })
  plan(@Args() { id }: PlanArgs): Promise<Plan | null> {
    return this.service.find(id);
  }

  @Query(() => [Plan], {
    description: 'Newest first; after = the id of the last plan of the previous page.',
  })
  plans(@Args() args: PlansArgs): Promise<Plan[]> {
    return this.service.list(args);
  }

  /**
   * Stores a plan made under `generation`; publishes it at once where the environment
   * needs no approval. Rejections: STALE_GENERATION {generation, fence},
   * UNKNOWN_GENERATION, LEASE_NOT_HELD (STRICT), PRECONDITION_FAILED {currentPlanId},
   * IDEMPOTENCY_KEY_REUSED, PAYLOAD_TOO_LARGE, NOT_FOUND.
   */
  @Roles(Role.AGENT)
  @TokenCheckedInDecision()
  @Mutation(() => Plan)
  submitPlan(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: SubmitPlanInput,
  ): Promise<Plan> {
    return this.service.submit(principal, input);
  }

  /**
   * Records the caller's approval; the one that completes the environment's approval rules
   * (or an ADMIN's break-glass approval) is the publication step. Rejections: SELF_APPROVAL,
   * ALREADY_APPROVED, FROZEN {reason, frozenBy}, FORBIDDEN (break-glass by a non-ADMIN),
   * STALE_GENERATION, INVALID_PLAN_STATE {status}, PRECONDITION_FAILED {currentPlanId},
   * NOT_FOUND.
   */
  @Roles(Role.REVIEWER)
  @TokenCheckedInDecision()
  @Mutation(() => Plan)
  approvePlan(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: ApprovePlanInput,
  ): Promise<Plan> {
    return this.service.approve(principal, input);
  }

  /** REVIEWER (and ADMIN). */
  @Roles(Role.REVIEWER)
  @UseInterceptors(ScopedListInterceptor)
  @Query(() => [Plan], {
    description: 'PROPOSED plans the caller could approve now, oldest first.',
  })
  reviewQueue(
    @CurrentPrincipal() principal: Principal,
    @Args() { first }: ReviewQueueArgs,
  ): Promise<Plan[]> {
    return this.service.reviewQueue(principal, first);
  }

  @ResolveField('status', () => PlanStatus)
  status(@Parent() plan: Plan): Promise<PlanStatus> {
    return this.service.status(plan);
  }

  @ResolveField('summary', () => PlanSummary, {
    nullable: true,
    description: 'Null for TEXT plans.',
  })
  async summary(@Parent() plan: Plan): Promise<PlanSummary | null> {
    // A plan rebuilt from an event reads its summary by id (a promise of the stored JSON).
    const stored = await (plan.summary as string | null | Promise<string | null>);
    return stored ? (JSON.parse(stored) as PlanSummary) : null;
  }

  /**
   * R54: the binary plan file holds every sensitive value in clear: DEPLOYER and ADMIN only;
   * any other role asking for it → FORBIDDEN.
   */
  @ResolveField('artifact', () => String, {
    nullable: true,
    description:
      'Base64 of the binary plan file (terraform plan -out), when one was submitted. DEPLOYER and ADMIN only (DESIGN R54).',
  })
  artifact(
    @Parent() plan: Plan,
    @Context() call: { req?: { principal?: Principal } },
  ): string | null {
    const role = call.req?.principal?.role;
    if (role !== Role.DEPLOYER && role !== Role.ADMIN) {
      throw new AuthError(
        'FORBIDDEN',
        `the plan file holds the plan's sensitive values: role ${role ?? 'none'} may not read artifact (DEPLOYER and ADMIN may)`,
      );
    }
    // A plan rebuilt from an event reads it by id (a promise of the stored text).
    return plan.artifact;
  }

  @ResolveField('priorState', () => TerraformState, {
    nullable: true,
    description:
      'The state the plan file was computed from, read from its tfstate entry (DESIGN R56).',
  })
  priorState(@Parent() plan: Plan): TerraformState | null {
    return plan.priorStateLineage != null && plan.priorStateSerial != null
      ? { lineage: plan.priorStateLineage, serial: plan.priorStateSerial }
      : null;
  }

  @ResolveField('reviewUrl', () => String, {
    description: 'The console page where a person reviews this plan.',
  })
  reviewUrl(
    @Parent() plan: Plan,
    @Context() call: { req?: { headers?: Record<string, string | string[] | undefined> } },
  ): string {
    return reviewUrl(this.service.baseUrl(call.req?.headers), plan.id);
  }

  @ResolveField('approvals', () => [Approval])
  approvals(@Parent() plan: Plan): Promise<Approval[]> {
    return this.service.approvals(plan);
  }

  @ResolveField('pendingApprovalRules', () => [ApprovalRule], {
    description:
      "Rules not yet met; empty once the approvals satisfy the environment's rules. count: approvals still needed.",
  })
  pendingApprovalRules(@Parent() plan: Plan): Promise<ApprovalRule[]> {
    return this.service.pendingApprovalRules(plan);
  }

  @Roles(Role.REVIEWER)
  @TokenCheckedInDecision()
  @Mutation(() => Plan)
  rejectPlan(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: RejectPlanInput,
  ): Promise<Plan> {
    return this.service.reject(principal, input);
  }

  /**
   * Every move of the environment's pointer, in order, after its commit, heard from every
   * instance. Authenticated with the connection's `authorization` parameter. A client that
   * reconnects passes the id of the last plan it received as `after` and first receives the
   * plans published since (docs/subscriptions.md).
   */
  @Subscription(() => Plan, { description: "Every move of the environment's pointer, in order." })
  planPublished(
    @Args() { environment, after }: PlanPublishedArgs,
    @Context() call: SubscriptionCall,
  ): Promise<AsyncIterable<unknown>> {
    return this.feeds.planPublished(call, environment, after);
  }
}
