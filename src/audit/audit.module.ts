import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { ActivityResolver } from './activity.resolver.js';
import { AuditResolver } from './audit.resolver.js';
import { AuditService } from './audit.service.js';
import { GraphqlDoorInterceptor } from './via.interceptor.js';

@Module({
  providers: [
    AuditService,
    AuditResolver,
    ActivityResolver,
    { provide: APP_INTERCEPTOR, useClass: GraphqlDoorInterceptor },
  ],
  exports: [AuditService],
})
export class AuditModule {}
