import { Module } from '@nestjs/common';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { ChecksResolver } from './checks.resolver.js';
import { ChecksService } from './checks.service.js';

/** Required checks on plans (DESIGN R50). */
@Module({
  imports: [DecisionsModule, FencingModule],
  providers: [ChecksService, ChecksResolver],
  exports: [ChecksService],
})
export class ChecksModule {}
