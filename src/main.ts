import './common/production-mode.js';
import { restoreIntl } from './common/defer-intl.js';
import './common/defer-modules.js';
import { Logger } from '@nestjs/common';
import type { Server } from 'node:http';
import { flushLogLines } from './common/batched-lines.js';
import { ConfigError, loadConfig } from './config/config.js';
import {
  EXIT_STORAGE_UNSAFE,
  guardBeforeLoading,
  onStorageUnsafe,
  StorageStartError,
} from './database/sqlite-files.js';
import { processHeapGrowth } from './limits/large-bodies.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`planfence: invalid configuration: ${error.message}`);
      process.exit(78);
    }
    throw error;
  }
  // SQLite's -shm file turned unwritable: the next access to its mapping would end the
  // process with SIGBUS and no word; stop now, saying why (docs/operations.md).
  onStorageUnsafe((reason) => {
    process.stderr.write(`planfence: stopping (exit ${EXIT_STORAGE_UNSAFE}): ${reason}\n`);
    process.exit(EXIT_STORAGE_UNSAFE);
  });
  // The application's modules load once the configuration is known to be good and a SQLite
  // file is this process's: a bad value, or a file another process holds, stops the start
  // before any of them is read.
  if (config.database.kind === 'sqlite' && config.database.path !== ':memory:') {
    guardBeforeLoading(config.database.path, { initialize: config.storage.initialize });
  }
  const { createApp } = await import('./app.js');
  restoreIntl();
  const app = await createApp(config);
  await app.listen(config.port, config.host);
  processHeapGrowth().settle();
  const logger = new Logger('planfence');
  const where =
    config.database.kind === 'sqlite'
      ? `SQLite ${config.database.path} (synchronous=${config.database.synchronous})`
      : 'PostgreSQL';
  const address = app.getHttpServer().address();
  const port = address && typeof address === 'object' ? address.port : config.port;
  const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  logger.log(
    `listening on ${base}/graphql, dashboard ${base}/, health ${base}/health, storage: ${where}`,
  );
  const oidc = config.identity.oidc;
  logger.log(
    oidc
      ? `OIDC configuration loaded from ${process.env.PLANFENCE_OIDC_CONFIG}: ${oidc.issuers.length} issuer(s) (${oidc.issuers.map((i) => i.issuer).join(', ')})`
      : 'no OIDC configuration (PLANFENCE_OIDC_CONFIG is not set): token exchange is off',
  );

  /**
   * SIGTERM/SIGINT: stop accepting, answer the requests in flight, close idle connections;
   * at the deadline close every remaining connection (a slow body, an open WebSocket), and
   * exit even if something still hangs.
   */
  const deadline = config.http.shutdownTimeoutMs;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal: exit now (the log lines in a batch are written at exit).
      logger.warn(`${signal} again: exiting without waiting for the shutdown`);
      process.exit(1);
    }
    stopping = true;
    logger.log(`${signal}: shutting down (deadline ${deadline / 1000} s)`);
    const server: Server = app.getHttpServer();
    setTimeout(() => {
      logger.warn('shutdown deadline reached: closing the remaining connections');
      server.closeAllConnections();
      setTimeout(() => process.exit(1), 2000).unref();
    }, deadline).unref();
    app.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  // The lines that say what failed first, then the summary (stderr).
  flushLogLines();
  console.error('planfence: failed to start:', error instanceof Error ? error.message : error);
  process.exit(error instanceof StorageStartError ? error.exitCode : 1);
});
