/** Jest for mutation testing: the in-process suites on SQLite (the fault harnesses run the compiled service). */
import config from './jest.config.js';

export default { ...config.projects[0], testPathIgnorePatterns: ['/node_modules/', '/test/fault(\\.test\\.ts$|/)'], testTimeout: 60000 };
