import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { METRICS_UNAUTHORIZED, MetricsAccess } from './metrics-access.js';
import { MetricsService } from './metrics.service.js';

/**
 * PLANFENCE_METRICS_LISTEN: a small HTTP server of its own that serves `GET /metrics` (and
 * nothing else) on that address, so the main port can face clients while the metrics stay
 * on an internal interface. PLANFENCE_METRICS_TOKEN, when set, is required there as well.
 * The start fails (naming the variable) when the address cannot be bound.
 */
@Injectable()
export class MetricsListener implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Metrics');
  private server: Server | null = null;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /** The bound address (its port when 0 was asked), or null when not listening. */
  get address(): AddressInfo | null {
    const address = this.server?.address();
    return address && typeof address === 'object' ? address : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    const listen = this.config.limits.metricsListen;
    if (!listen) return;
    const access = new MetricsAccess(this.config.limits.metricsToken);
    const server = createServer((request, response) => {
      const path = (request.url ?? '').split('?')[0];
      if (path !== '/metrics') return void response.writeHead(404).end();
      if (request.method !== 'GET' && request.method !== 'HEAD')
        return void response.writeHead(405, { allow: 'GET, HEAD' }).end();
      if (!access.allows(request.headers.authorization)) {
        return void response
          .writeHead(401, {
            'content-type': 'application/json',
            'www-authenticate': 'Bearer realm="metrics"',
          })
          .end(JSON.stringify(METRICS_UNAUTHORIZED));
      }
      this.metrics.text().then(
        (text) =>
          response
            .writeHead(200, {
              'content-type': this.metrics.contentType,
              'cache-control': 'no-store',
            })
            .end(request.method === 'HEAD' ? undefined : text),
        (error: unknown) => {
          this.logger.error(`/metrics: ${(error as Error).message}`);
          response.writeHead(500).end();
        },
      );
    });
    server.headersTimeout = 5000;
    server.requestTimeout = 10_000;
    server.keepAliveTimeout = 5000;
    server.maxConnections = 64;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new Error(
            `PLANFENCE_METRICS_LISTEN: cannot listen on ${listen.host}:${listen.port}: ${error.code ?? error.message}`,
          ),
        ),
      );
      server.listen(listen.port, listen.host, () => resolve());
    });
    server.on('error', (error) => this.logger.error(`/metrics server: ${error.message}`));
    this.server = server;
    const bound = this.address!;
    const where = `http://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}/metrics`;
    if (access.open) {
      this.logger.warn(
        `/metrics is served on ${where} only, open to anyone who can reach that address; set PLANFENCE_METRICS_TOKEN to require a bearer token`,
      );
    } else {
      this.logger.log(`/metrics is served on ${where} only (bearer token required)`);
    }
  }

  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
