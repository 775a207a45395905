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
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { CurrentPrincipal, Roles } from '../auth/roles.decorator.js';
import { SubscriptionFeeds, type SubscriptionCall } from '../events/feeds.js';
import { DeploymentChangedArgs } from '../events/subscription.args.js';
import { Plan } from '../model/plan.entity.js';
import { Deployment } from '../model/deployment.entity.js';
import { DeploymentsService } from './deployments.service.js';
import {
  DeploymentArgs,
  DeploymentsArgs,
  FinishDeploymentInput,
  HeartbeatDeploymentInput,
  ReconcileDeploymentInput,
  ReportDriftArgs,
  StartDeploymentInput,
} from './dto/deployment.input.js';
import { Environment } from '../model/environment.entity.js';

@Resolver(() => Deployment)
export class DeploymentsResolver {
  constructor(
    private readonly service: DeploymentsService,
    private readonly feeds: SubscriptionFeeds,
  ) {}

  @Query(() => Deployment, { nullable: true })
  deployment(@Args() { id }: DeploymentArgs): Promise<Deployment | null> {
    return this.service.find(id);
  }

  @Query(() => [Deployment], { description: 'Newest first.' })
  deployments(@Args() args: DeploymentsArgs): Promise<Deployment[]> {
    return this.service.list(args);
  }

  /**
   * R18: starts a deployment of the environment's current plan. Rejections:
   * PRECONDITION_FAILED {currentPlanId}, DEPLOYMENT_ACTIVE {deploymentId, status},
   * IDEMPOTENCY_KEY_REUSED, NOT_FOUND.
   */
  @Roles(Role.DEPLOYER)
  @Mutation(() => Deployment)
  startDeployment(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: StartDeploymentInput,
  ): Promise<Deployment> {
    return this.service.start(principal, input);
  }

  /** R19: the starter's heartbeat. DEPLOYMENT_NOT_ACTIVE {status} once it ended or for anyone else. */
  @Roles(Role.DEPLOYER)
  @Mutation(() => Deployment)
  heartbeatDeployment(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: HeartbeatDeploymentInput,
  ): Promise<Deployment> {
    return this.service.heartbeat(principal, input);
  }

  /** R19: the starter's report. DEPLOYMENT_NOT_ACTIVE {status} once it ended (or was reconciled) or for anyone else. */
  @Roles(Role.DEPLOYER)
  @Mutation(() => Deployment)
  finishDeployment(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: FinishDeploymentInput,
  ): Promise<Deployment> {
    return this.service.finish(principal, input);
  }

  /**
   * R20: resolves an UNKNOWN deployment. DEPLOYMENT_ACTIVE {deploymentId, status} while its
   * heartbeat is live; DEPLOYMENT_NOT_ACTIVE {status} once it ended.
   */
  @Roles(Role.REVIEWER)
  @Mutation(() => Deployment)
  reconcileDeployment(
    @CurrentPrincipal() principal: Principal,
    @Args('input') input: ReconcileDeploymentInput,
  ): Promise<Deployment> {
    return this.service.reconcile(principal, input);
  }

  /** R53: DEPLOYER or CHECKER (or ADMIN): moves the deployment sequence; NOT_FOUND. */
  @Roles(Role.DEPLOYER, Role.CHECKER)
  @Mutation(() => Environment, {
    description: 'DEPLOYER or CHECKER: moves deploymentSequence (DESIGN R53).',
  })
  reportDrift(
    @CurrentPrincipal() principal: Principal,
    @Args() args: ReportDriftArgs,
  ): Promise<Environment> {
    return this.service.reportDrift(principal, args);
  }

  @ResolveField('plan', () => Plan)
  plan(@Parent() deployment: Deployment): Promise<Plan> {
    return this.service.plan(deployment);
  }

  /**
   * Every change of a deployment's status, after its commit, in commit order, heard from
   * every instance. `after`: the id of the last deployment received; the current state of it
   * and of every later deployment comes first (docs/subscriptions.md).
   */
  @Subscription(() => Deployment, { description: "Every change of a deployment's status." })
  deploymentChanged(
    @Args() { environment, after }: DeploymentChangedArgs,
    @Context() call: SubscriptionCall,
  ): Promise<AsyncIterable<unknown>> {
    return this.feeds.deploymentChanged(call, environment, after);
  }
}
