/**
 * Jest runs the TypeScript sources as ES modules through SWC. One project per
 * database: SQLite always; PostgreSQL as well when PLANFENCE_TEST_POSTGRES_URL names a
 * server (each test app gets a database of its own there). The same suites run in both.
 */
const base = {
  testEnvironment: '<rootDir>/test/support/environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
          target: 'es2022',
          keepClassNames: true,
        },
        module: { type: 'es6' },
      },
    ],
  },
};

const projects = [{ ...base, displayName: 'sqlite' }];
if (process.env.PLANFENCE_TEST_POSTGRES_URL) {
  projects.push({
    ...base,
    displayName: 'postgres',
    globals: { __DATABASE__: 'postgres' },
    // The fault harnesses, the docs' walkthroughs and the start-up logs drive SQLite-file
    // service processes, and the package is packed and installed once; they run in the
    // sqlite project.
    testPathIgnorePatterns: [
      '/node_modules/',
      '/test/fault(\\.test\\.ts$|/)',
      '/test/demo\\.test\\.ts$',
      '/test/docs\\.test\\.ts$',
      '/test/startup-logs\\.test\\.ts$',
      '/test/pack\\.test\\.ts$',
    ],
  });
}

export default {
  projects,
  testTimeout: 60000,
  // One test file at a time, in a worker process that is replaced once a file leaves it
  // above this much memory: what one file keeps alive cannot slow down the files after it.
  workerIdleMemoryLimit: '1GB',
  globalSetup: '<rootDir>/test/support/global-setup.js',
  globalTeardown: '<rootDir>/test/support/global-teardown.js',
};
