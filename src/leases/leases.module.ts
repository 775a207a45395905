import { Module } from '@nestjs/common';
import { FencingModule } from '../fencing/fencing.module.js';
import { LeasesResolver } from './leases.resolver.js';
import { LeasesService } from './leases.service.js';

@Module({
  imports: [FencingModule],
  providers: [LeasesService, LeasesResolver],
  exports: [LeasesService],
})
export class LeasesModule {}
