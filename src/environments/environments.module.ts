import { Module } from '@nestjs/common';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { PoliciesModule } from '../policies/policies.module.js';
import { EnvironmentsResolver } from './environments.resolver.js';
import { EnvironmentsService } from './environments.service.js';

@Module({
  imports: [DecisionsModule, FencingModule, PoliciesModule],
  providers: [EnvironmentsService, EnvironmentsResolver],
  exports: [EnvironmentsService],
})
export class EnvironmentsModule {}
