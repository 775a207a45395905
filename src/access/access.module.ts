import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { QuotasModule } from '../quotas/quotas.module.js';
import { Access } from './access.js';
import { AuthGuard } from './auth.guard.js';

/**
 * The checks every door applies (Access) and the GraphQL request gate (AuthGuard): a global
 * guard that runs before the QuotaGuard, which charges the principal it found (global guards
 * run in the order their modules are scanned: this module imports QuotasModule, so it comes
 * first when AppModule names it before any other importer of QuotasModule).
 */
@Module({
  imports: [AuthModule, DecisionsModule, QuotasModule],
  providers: [Access, { provide: APP_GUARD, useClass: AuthGuard }],
  exports: [Access],
})
export class AccessModule {}
