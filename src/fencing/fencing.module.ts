import { Module } from '@nestjs/common';
import { DeploymentWrites } from './deployment-writes.js';
import { EnvironmentWrites } from './environment-writes.js';
import { LeaseWrites } from './lease-writes.js';
import { PlanWrites } from './plan-writes.js';

/** The guard: the only writer of protected state. What else it decides, the decision runner sends. */
@Module({
  providers: [EnvironmentWrites, LeaseWrites, PlanWrites, DeploymentWrites],
  exports: [EnvironmentWrites, LeaseWrites, PlanWrites, DeploymentWrites],
})
export class FencingModule {}
