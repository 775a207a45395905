import { DataSource } from 'typeorm';
import { loadConfig } from '../config/config.js';
import { dataSourceOptions } from './data-source.js';

/** For the TypeORM CLI: `npx typeorm migration:show -d dist/src/database/cli-data-source.js`. */
export default new DataSource(dataSourceOptions(loadConfig()));
