import { existsSync } from 'node:fs';

/**
 * Jest runs the TypeScript sources as ES modules through SWC. One project per
 * database: SQLite always; PostgreSQL as well when PLANFENCE_TEST_POSTGRES_URL names a
 * server (each test app gets a database of its own there). The same suites run in both,
 * but for those listed below; TIER splits them into `npm test` and `npm run test:rest`.
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
          transform: {
            legacyDecorator: true,
            decoratorMetadata: true,
            useDefineForClassFields: false,
          },
          target: 'es2022',
          keepClassNames: true,
        },
        module: { type: 'es6' },
      },
    ],
  },
};

/** The ignore patterns of these suites (paths under test/, without .test.ts). */
const onlyOn = (names) => names.map((name) => `/test/${name}\\.test\\.ts$`);
/** Suites whose every test is for one database: the other project does not load them. */
const POSTGRES_ONLY = onlyOn([
  'round-trips',
  'submit-at-once',
  'submit-statement',
  'webhooks-instances',
]);
const SQLITE_ONLY = onlyOn([
  'operator/health-writes',
  'operator/sqlite-cache',
  'operator/sqlite-temp-files',
  'operator/plan-row-width',
  'sqlite-checkpoints',
]);

/**
 * `npm test` is the fast tier: every suite but the system suites on SQLite, and on
 * PostgreSQL the suites whose subject the database decides (FAST_POSTGRES). `npm run
 * test:rest` runs everything else: the system suites, and the PostgreSQL runs of the other
 * suites. The two together are every suite on every configured database, as CI runs them
 * (PLANFENCE_TEST_TIER=fast and rest; unset, every suite runs, as `npm run test:one` runs
 * the files it names).
 *
 * The system suites drive processes besides the service in the test's own worker: the
 * service as a process killed with SIGKILL (the fault harnesses, the crash suites, storage
 * and first-start operations), the command line, the package packed and installed, the
 * walkthroughs and the demo, the container image, the console and dashboard in a browser.
 */
const SYSTEM = [
  'fault',
  'demo',
  'docs',
  'startup-logs',
  'pack',
  'image',
  'deploy',
  'cli',
  'preconditions-cli',
  'runner',
  'terraform-cli',
  'deployments-client',
  'console',
  'console-layout',
  'console-terraform',
  'dashboard',
  'mcp-clients-outside',
  'sensitive',
  'webhooks-crash',
  'deployments-crash',
  'slack-crash',
  'storage-shm',
  'operator/storage',
  'operator/admin-bootstrap',
];
/**
 * The suites `npm test` runs on PostgreSQL too: the reference models of the guard and of
 * deployments, what the guard's statements and their round trips are, concurrency, group
 * commit, the fencing modes, generations, idempotency, the lease queue, approval, the
 * protected writes, the environment's row lock, the decisions per environment, and what PostgreSQL does with its own statements
 * or channels (revoked tokens told to every instance, webhook and subscription instances,
 * migrations under the instances' lock at start).
 */
const FAST_POSTGRES = [
  'model',
  'deployments-model',
  'round-trips',
  'submit-at-once',
  'submit-statement',
  'concurrency',
  'group-commit',
  'fencing-modes',
  'generations',
  'idempotency',
  'lease-queue',
  'protected-writes',
  'row-locks',
  'decisions-per-environment',
  'approval',
  'identity-tokens',
  'webhooks',
  'webhooks-instances',
  'subscriptions-instances',
  'startup',
];
for (const name of [...SYSTEM, ...FAST_POSTGRES])
  if (!existsSync(new URL(`test/${name}.test.ts`, import.meta.url)))
    throw new Error(`jest.config.js names test/${name}.test.ts, which does not exist`);
const TIER = process.env.PLANFENCE_TEST_TIER ?? 'all';
if (!['all', 'fast', 'rest'].includes(TIER))
  throw new Error(`PLANFENCE_TEST_TIER must be fast, rest or unset, not ${TIER}`);
const matching = (names) => names.map((name) => `**/test/${name}.test.ts`);
const ignoring = (project, names) => [
  ...(project.testPathIgnorePatterns ?? ['/node_modules/']),
  ...onlyOn(names),
];

const projects = [{ ...base, displayName: 'sqlite' }];
if (process.env.PLANFENCE_TEST_POSTGRES_URL) {
  // With a PostgreSQL project beside it, the SQLite project leaves out the PostgreSQL-only
  // suites (each would load the whole app only to report its tests skipped). Without one,
  // it loads them, and they are reported skipped.
  projects[0].testPathIgnorePatterns = ['/node_modules/', ...POSTGRES_ONLY];
  projects.push({
    ...base,
    displayName: 'postgres',
    globals: { __DATABASE__: 'postgres' },
    // Run once, in the sqlite project:
    // - the fault harnesses, the docs' walkthroughs and the start-up logs, which drive
    //   SQLite-file service processes (the harnesses take a PostgreSQL server themselves);
    // - what proves code outside the service, the same whatever database the service runs
    //   on: the package (packed and installed), the client, the command line and the
    //   runner (a DEPLOYER client driving terraform), the console and the dashboard in a
    //   browser, and the checks on files (contract, design index, pictures);
    // - the HTTP layer's own defences (hostile/http: timeouts, connection caps, headers,
    //   /metrics, SIGTERM), which act before a request reaches any database.
    // Every rule the service decides is proven on both databases by the other suites.
    testPathIgnorePatterns: [
      '/node_modules/',
      '/test/fault(\\.test\\.ts$|/)',
      ...onlyOn([
        'demo',
        'docs',
        'startup-logs',
        'pack',
        'agent-example',
        'cli',
        'cli-coverage',
        'preconditions-cli',
        'runner',
        'dashboard',
        'client',
        'client-errors',
        'deployments-client',
        'terraform-cli',
        'sensitive',
        'image',
        'deploy',
        'console',
        'console-layout',
        'console-terraform',
        'mcp-clients-outside',
        'contract',
        'graphql-documents',
        'slack-sign-in',
        'client-types',
        'design',
        'docs-images',
        'guard-writes',
        'hostile/http',
        'json-bodies',
      ]),
      ...SQLITE_ONLY,
    ],
  });
}

for (const project of projects) {
  const postgres = project.displayName === 'postgres';
  if (TIER === 'fast') {
    if (postgres) project.testMatch = matching(FAST_POSTGRES);
    else project.testPathIgnorePatterns = ignoring(project, SYSTEM);
  }
  if (TIER === 'rest') {
    if (postgres) project.testPathIgnorePatterns = ignoring(project, FAST_POSTGRES);
    else project.testMatch = matching(SYSTEM);
  }
}

export default {
  projects,
  testTimeout: 60000,
  // One test file at a time, in a worker process that is replaced once a file leaves it
  // above this much memory: what one file keeps alive cannot slow down the files after it.
  workerIdleMemoryLimit: '1GB',
  // A worker process takes a while to end once its event loop is empty: disposing of the
  // heap its files built took 300 ms to over 500 ms on a loaded 2-core machine. At jest's
  // default (500 ms) the worker is killed and reported as "failed to exit gracefully", as
  // if a test had left something open. One that really holds a handle is still reported,
  // 5 s later.
  workerGracefulExitTimeout: 5000,
  testSequencer: '<rootDir>/test/support/sequencer.js',
  globalSetup: '<rootDir>/test/support/global-setup.js',
  globalTeardown: '<rootDir>/test/support/global-teardown.js',
};
