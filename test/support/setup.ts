import { closeOpenApps } from './app.js';

// A test that fails before closing its apps leaves nothing running for the rest of the run.
afterAll(closeOpenApps);
