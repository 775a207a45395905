import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module.js';
import { ActivityResolver } from './activity.resolver.js';
import { AuditResolver } from './audit.resolver.js';
import { AuditService } from './audit.service.js';

@Module({
  imports: [EventsModule],
  providers: [AuditService, AuditResolver, ActivityResolver],
  exports: [AuditService],
})
export class AuditModule {}
