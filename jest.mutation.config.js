/**
 * Jest for mutation testing: the in-process suites that exercise the guard, on SQLite.
 * (The fault harnesses run the compiled service, which mutants do not reach.)
 */
import { fileURLToPath } from 'node:url';
import config from './jest.config.js';

export default {
  ...config.projects[0],
  // Stryker's environment wrapper loads this path itself, without resolving <rootDir>.
  testEnvironment: fileURLToPath(new URL('./test/support/environment.js', import.meta.url)),
  testMatch: [
    '**/fencing-modes.test.ts',
    '**/generations.test.ts',
    '**/approval.test.ts',
    '**/idempotency.test.ts',
    '**/model.test.ts',
    '**/subscriptions.test.ts',
    '**/plan-policies.test.ts',
    '**/deployments.test.ts',
    '**/deployments-model.test.ts',
    '**/restore.test.ts',
    '**/lease-queue.test.ts',
    '**/retention.test.ts',
    '**/policies.test.ts',
    '**/plan-staleness.test.ts',
    // What the outbox records for a decision (events, their actors and order), as delivered.
    '**/webhooks.test.ts',
    // What each guard write decides, as values (outcome and effects), without the service.
    '**/guard-writes.test.ts',
    // The environment's row lock; its PostgreSQL cases too where a server is named.
    '**/row-locks.test.ts',
    // PostgreSQL's submit in one statement, where a server is named.
    '**/submit-statement.test.ts',
    // R50–R53: required checks, promotion, the deploy window and drift.
    '**/preconditions.test.ts',
    // SQLite: what the writer thread stores, against the request thread's statements.
    '**/writer-thread.test.ts',
  ],
  // The mutants live in the sources: every file loads them into its own registry.
  globals: { ...config.projects[0].globals, __planfenceInRealm: true },
  // Every suite listed runs here (a PostgreSQL-only one finds its server itself).
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 60000,
  // A mutant's run loads only the files that hold the tests covering it.
  testSequencer: fileURLToPath(new URL('./test/support/mutation-sequencer.js', import.meta.url)),
};
