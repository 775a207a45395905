import { Module } from '@nestjs/common';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { RetentionService } from './retention.service.js';

@Module({
  imports: [DecisionsModule, FencingModule],
  providers: [RetentionService],
  exports: [RetentionService],
})
export class RetentionModule {}
