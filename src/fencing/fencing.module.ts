import { Module } from '@nestjs/common';
import { DeploymentsGuard } from './deployments.guard.js';
import { FenceService } from './fence.service.js';

@Module({
  providers: [FenceService, DeploymentsGuard],
  exports: [FenceService, DeploymentsGuard],
})
export class FencingModule {}
