import { createHash, timingSafeEqual } from 'node:crypto';
import { Controller, Get, Header, Headers, Inject, Logger, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { MetricsService } from './metrics.service.js';

const digest = (value: string) => createHash('sha256').update(value).digest();

@Controller('metrics')
export class MetricsController {
  private readonly expected: Buffer | null;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(CONFIG) config: Config,
  ) {
    this.expected = config.limits.metricsToken
      ? digest(`Bearer ${config.limits.metricsToken}`)
      : null;
    if (!this.expected) {
      new Logger('Metrics').warn(
        '/metrics is open to anyone who can reach this port; set PLANFENCE_METRICS_TOKEN to require a bearer token',
      );
    }
  }

  /** Prometheus text format; with PLANFENCE_METRICS_TOKEN set, only for `Authorization: Bearer <it>` (else 401). */
  @Get()
  @Header('cache-control', 'no-store')
  async scrape(
    @Headers('authorization') authorization: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (this.expected && !timingSafeEqual(digest(String(authorization ?? '')), this.expected)) {
      await reply.code(401).header('www-authenticate', 'Bearer realm="metrics"').send({
        error: 'metrics need Authorization: Bearer <PLANFENCE_METRICS_TOKEN>',
        code: 'UNAUTHENTICATED',
      });
      return;
    }
    await reply.header('content-type', this.metrics.contentType).send(await this.metrics.text());
  }
}
