import { Module } from '@nestjs/common';
import { PolicyEngine } from './policy-engine.js';
import { PoliciesService } from './policies.service.js';
import {
  EnvironmentPoliciesResolver,
  PlanPoliciesResolver,
  PoliciesResolver,
} from './policies.resolver.js';

@Module({
  providers: [
    PolicyEngine,
    PoliciesService,
    PoliciesResolver,
    EnvironmentPoliciesResolver,
    PlanPoliciesResolver,
  ],
  exports: [PoliciesService],
})
export class PoliciesModule {}
