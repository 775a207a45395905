/**
 * Jest for mutation testing the plan policy decision (npm run test:mutation:policies): the
 * suite that proves R34–R36 over HTTP, on SQLite.
 */
import config from './jest.config.js';

export default {
  ...config.projects[0],
  testMatch: ['**/plan-policies.test.ts'],
  testTimeout: 60000,
};
