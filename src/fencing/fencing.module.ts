import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { IdempotencyModule } from '../idempotency/idempotency.module.js';
import { DecisionRunner } from './decision.runner.js';
import { DeploymentsGuard } from './deployments.guard.js';
import { FenceService } from './fence.service.js';

@Module({
  imports: [AuditModule, IdempotencyModule],
  providers: [FenceService, DecisionRunner, DeploymentsGuard],
  exports: [FenceService, DecisionRunner, DeploymentsGuard],
})
export class FencingModule {}
