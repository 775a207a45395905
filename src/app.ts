import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { pino, type Logger } from 'pino';
import { logRequests, PinoNestLogger } from './common/logging.js';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';
import type { Clock } from './common/clock.js';
import { validationPipe } from './common/validation.js';
import type { Config } from './config/config.js';

export interface AppOptions {
  /** Replaces the service clock (tests). */
  clock?: Clock;
  /** The JSON logger (default: info level to stdout). */
  logger?: Logger;
}

/** Builds the service: runs pending migrations, bootstraps the admin token, ready to `listen`. */
export async function createApp(
  config: Config,
  options: AppOptions = {},
): Promise<NestFastifyApplication> {
  // A plan's JSON encoding can be larger than its UTF-8 bytes (escapes); leave room, the service enforces the limit.
  const bodyLimit = config.maxPlanBytes * 6 + 64 * 1024;
  const logger = options.logger ?? pino({ level: config.logLevel, base: { service: 'planfence' } });
  const adapter = new FastifyAdapter({ bodyLimit, genReqId: () => randomUUID() });
  logRequests(adapter.getInstance(), logger);
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(config, options.clock),
    adapter,
    {
      logger: new PinoNestLogger(logger),
      abortOnError: false,
    },
  );
  app.useGlobalPipes(validationPipe);
  app.enableShutdownHooks();
  await app.init();
  return app;
}
