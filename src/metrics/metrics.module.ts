import { Global, Module } from '@nestjs/common';
import { MetricsController } from './metrics.controller.js';
import { MetricsListener } from './metrics-listener.js';
import { MetricsService } from './metrics.service.js';

@Global()
@Module({
  providers: [MetricsService, MetricsListener],
  controllers: [MetricsController],
  exports: [MetricsService],
})
export class MetricsModule {}
