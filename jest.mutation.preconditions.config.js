/**
 * Jest for mutation testing the preconditions beyond approval (npm run
 * test:mutation:preconditions): the suites that prove R50–R53 over HTTP, on SQLite, and the
 * deployments model test, whose reference model holds checks, promotion, the deploy window
 * and drift, and the suites of what they share (approval, plan policies, the outbox).
 */
import { fileURLToPath } from 'node:url';
import config from './jest.config.js';

export default {
  ...config.projects[0],
  // Stryker's environment wrapper loads this path itself, without resolving <rootDir>.
  testEnvironment: fileURLToPath(new URL('./test/support/environment.js', import.meta.url)),
  testMatch: [
    '**/preconditions.test.ts',
    '**/deployments-model.test.ts',
    // The publishing steps R50–R53 share with approval (publicationCas) and plan policies.
    '**/approval.test.ts',
    '**/plan-policies.test.ts',
    // What the outbox records of a check report and of drift.
    '**/webhooks.test.ts',
  ],
  // The mutants live in the sources: every file loads them into its own registry.
  globals: { ...config.projects[0].globals, __planfenceInRealm: true },
  testTimeout: 60000,
};
