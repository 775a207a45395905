import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { QuotaGuard } from './quota.guard.js';
import { QuotasService } from './quotas.service.js';

/** Rate limits and quotas for every GraphQL root field; import it after AuthModule. */
@Module({
  providers: [QuotasService, { provide: APP_GUARD, useClass: QuotaGuard }],
  exports: [QuotasService],
})
export class QuotasModule {}
