import { Logger } from '@nestjs/common';
import { createApp } from './app.js';
import { ConfigError, loadConfig } from './config/config.js';

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
  const app = await createApp(config);
  await app.listen(config.port, config.host);
  const where =
    config.database.kind === 'sqlite'
      ? `SQLite ${config.database.path} (synchronous=${config.database.synchronous})`
      : 'PostgreSQL';
  new Logger('planfence').log(
    `listening on http://${config.host}:${config.port}/graphql, storage: ${where}`,
  );
}

main().catch((error: unknown) => {
  console.error('planfence: failed to start:', error instanceof Error ? error.message : error);
  process.exit(1);
});
