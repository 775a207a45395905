import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/config.js';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { migrate } from '../../src/database/migrator.js';

/**
 * The service's data source on `url`, initialized and migrated, without the service: for
 * suites that hand the guard's writes a transaction of their own. Nest's logger is silenced.
 */
export async function migratedDataSource(url: string): Promise<DataSource> {
  Logger.overrideLogger(false);
  const config = loadConfig({
    DATABASE_URL: url,
    PLANFENCE_ADMIN_TOKEN: 'pf_admin_token_for_guard_tests_0123456789',
  });
  const dataSource = new DataSource(dataSourceOptions(config));
  await dataSource.initialize();
  await migrate(dataSource, new Logger('migrations'));
  return dataSource;
}
