import { Controller, Get, Header, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { MetricsService } from './metrics.service.js';

@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  /** Prometheus text format. */
  @Get()
  @Header('cache-control', 'no-store')
  async scrape(@Res() reply: FastifyReply): Promise<void> {
    await reply
      .header('content-type', this.metrics.registry.contentType)
      .send(await this.metrics.registry.metrics());
  }
}
