import type { pino } from 'pino';
import type { createApp } from '../../src/app.js';
import type { ManualClock } from '../../src/common/clock.js';
import type { loadConfig } from '../../src/config/config.js';
import type { loopTurns } from '../../src/common/loop-turns.js';

/** What test/support/app.ts starts a service with. */
export interface ServiceModules {
  createApp: typeof createApp;
  ManualClock: typeof ManualClock;
  loadConfig: typeof loadConfig;
  /** The request thread's queue of turns the service's modules share. */
  loopTurns: typeof loopTurns;
  pino: typeof pino;
}

/**
 * The service's modules: those test/support/environment.js loaded once for the worker from
 * dist/ (test/support/native.js), when it gave them to this file; else the sources, loaded
 * into this file's own registry (a file that imports the service's classes itself, a stale
 * build, mutation testing).
 */
export async function serviceModules(): Promise<ServiceModules> {
  const native = (globalThis as { __planfenceService?: ServiceModules }).__planfenceService;
  if (native) return native;
  const [app, clock, config, turns, logger] = await Promise.all([
    import('../../src/app.js'),
    import('../../src/common/clock.js'),
    import('../../src/config/config.js'),
    import('../../src/common/loop-turns.js'),
    import('pino'),
  ]);
  return {
    createApp: app.createApp,
    ManualClock: clock.ManualClock,
    loadConfig: config.loadConfig,
    loopTurns: turns.loopTurns,
    pino: logger.pino,
  };
}
