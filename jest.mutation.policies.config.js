/**
 * Jest for mutation testing the plan policy decision (npm run test:mutation:policies): the
 * suite that proves R34–R36 over HTTP, on SQLite.
 */
import { fileURLToPath } from 'node:url';
import config from './jest.config.js';

export default {
  ...config.projects[0],
  // Stryker's environment wrapper loads this path itself, without resolving <rootDir>.
  testEnvironment: fileURLToPath(new URL('./test/support/environment.js', import.meta.url)),
  testMatch: ['**/plan-policies.test.ts'],
  // The mutants live in the sources: every file loads them into its own registry.
  globals: { ...config.projects[0].globals, __planfenceInRealm: true },
  testTimeout: 60000,
};
