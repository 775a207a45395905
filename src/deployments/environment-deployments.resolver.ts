import { Parent, ResolveField, Resolver } from '@nestjs/graphql';
import { Environment } from '../model/environment.entity.js';
import { Plan } from '../model/plan.entity.js';
import { Deployment } from '../model/deployment.entity.js';
import { DeploymentsService } from './deployments.service.js';

/** The deployment fields of an environment (R21). */
@Resolver(() => Environment)
export class EnvironmentDeploymentsResolver {
  constructor(private readonly service: DeploymentsService) {}

  @ResolveField('activeDeployment', () => Deployment, {
    nullable: true,
    description: 'The deployment that is IN_PROGRESS or UNKNOWN, if any.',
  })
  activeDeployment(@Parent() env: Environment): Promise<Deployment | null> {
    return this.service.active(env.name);
  }

  @ResolveField('deployedPlan', () => Plan, {
    nullable: true,
    description: 'The plan of the last SUCCEEDED deployment.',
  })
  deployedPlan(@Parent() env: Environment): Promise<Plan | null> {
    return this.service.deployedPlan(env.name);
  }
}
