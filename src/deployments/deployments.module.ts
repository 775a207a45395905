import { Module } from '@nestjs/common';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { EventsModule } from '../events/events.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { DeploymentsResolver } from './deployments.resolver.js';
import { DeploymentsService } from './deployments.service.js';
import { EnvironmentDeploymentsResolver } from './environment-deployments.resolver.js';

@Module({
  imports: [DecisionsModule, EventsModule, FencingModule],
  providers: [DeploymentsService, DeploymentsResolver, EnvironmentDeploymentsResolver],
  exports: [DeploymentsService],
})
export class DeploymentsModule {}
