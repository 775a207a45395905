import { Module } from '@nestjs/common';
import { FencingModule } from '../fencing/fencing.module.js';
import { EnvironmentsResolver } from './environments.resolver.js';
import { EnvironmentsService } from './environments.service.js';

@Module({
  imports: [FencingModule],
  providers: [EnvironmentsService, EnvironmentsResolver],
  exports: [EnvironmentsService],
})
export class EnvironmentsModule {}
