import { Module } from '@nestjs/common';
import { AccessModule } from '../access/access.module.js';
import { PgListenerModule } from '../database/pg-listener.module.js';
import { DecisionsModule } from '../decisions/decisions.module.js';
import { FencingModule } from '../fencing/fencing.module.js';
import { LeaseQueueResolver } from './lease-queue.resolver.js';
import { LeaseQueueService } from './lease-queue.service.js';
import { LeaseQueueSweeper } from './lease-queue.sweeper.js';
import { LeasesResolver } from './leases.resolver.js';
import { LeasesService } from './leases.service.js';

@Module({
  imports: [AccessModule, DecisionsModule, FencingModule, PgListenerModule],
  providers: [
    LeasesService,
    LeasesResolver,
    LeaseQueueService,
    LeaseQueueResolver,
    LeaseQueueSweeper,
  ],
  exports: [LeasesService, LeaseQueueService],
})
export class LeasesModule {}
