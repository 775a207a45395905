import { Controller, Get, Header, Headers, Inject, Logger, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { METRICS_UNAUTHORIZED, MetricsAccess } from './metrics-access.js';
import { MetricsService } from './metrics.service.js';

@Controller('metrics')
export class MetricsController {
  private readonly access: MetricsAccess;
  /** PLANFENCE_METRICS_LISTEN is set: /metrics is served there (MetricsListener), not here. */
  private readonly elsewhere: boolean;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(CONFIG) config: Config,
  ) {
    this.access = new MetricsAccess(config.limits.metricsToken);
    this.elsewhere = config.limits.metricsListen !== null;
    if (this.access.open && !this.elsewhere) {
      new Logger('Metrics').warn(
        '/metrics is open to anyone who can reach this port; set PLANFENCE_METRICS_TOKEN to require a bearer token, or PLANFENCE_METRICS_LISTEN to serve it on another address',
      );
    }
  }

  /**
   * Prometheus text format; with PLANFENCE_METRICS_TOKEN set, only for `Authorization: Bearer
   * <it>` (else 401). With PLANFENCE_METRICS_LISTEN set, 404 here, as for any unknown path.
   */
  @Get()
  @Header('cache-control', 'no-store')
  async scrape(
    @Headers('authorization') authorization: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (this.elsewhere) {
      await reply
        .code(404)
        .send({ message: 'Route GET:/metrics not found', error: 'Not Found', statusCode: 404 });
      return;
    }
    if (!this.access.allows(authorization)) {
      await reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="metrics"')
        .send(METRICS_UNAUTHORIZED);
      return;
    }
    await reply.header('content-type', this.metrics.contentType).send(await this.metrics.text());
  }
}
