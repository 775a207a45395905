import { Module } from '@nestjs/common';
import { ActivityResolver } from './activity.resolver.js';
import { AuditResolver } from './audit.resolver.js';
import { AuditService } from './audit.service.js';

@Module({
  providers: [AuditService, AuditResolver, ActivityResolver],
  exports: [AuditService],
})
export class AuditModule {}
