import { Module } from '@nestjs/common';
import { EnvironmentsModule } from '../environments/environments.module.js';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { EventsModule } from '../events/events.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { PoliciesModule } from '../policies/policies.module.js';
import { PlansResolver } from './plans.resolver.js';
import { PlansService } from './plans.service.js';

@Module({
  imports: [DecisionsModule, FencingModule, EnvironmentsModule, EventsModule, PoliciesModule],
  providers: [PlansService, PlansResolver],
  exports: [PlansService],
})
export class PlansModule {}
