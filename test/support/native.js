/**
 * The service's modules as `npm run build` compiled them (dist/), imported once per jest
 * worker process, outside jest's per-file module registry. A test file that reaches the
 * service only over HTTP (through test/support/app.ts) starts its apps from these: it does
 * not load Nest, Mercurius and TypeORM again into its own registry (about two seconds of
 * CPU per file). test/support/environment.js hands them to such a file when dist/ is
 * current; every other file loads the sources as before (test/support/service.ts).
 */
const ROOT = new URL('../../', import.meta.url);

let loaded;

/** createApp, ManualClock, loadConfig, loopTurns and pino, from dist/; loaded by the first caller. */
export function nativeService() {
  loaded ??= Promise.all([
    import(new URL('dist/src/app.js', ROOT).href),
    import(new URL('dist/src/common/clock.js', ROOT).href),
    import(new URL('dist/src/config/config.js', ROOT).href),
    import(new URL('dist/src/common/loop-turns.js', ROOT).href),
    import('pino'),
  ]).then(([app, clock, config, turns, pino]) =>
    Object.freeze({
      createApp: app.createApp,
      ManualClock: clock.ManualClock,
      loadConfig: config.loadConfig,
      loopTurns: turns.loopTurns,
      pino: pino.pino,
    }),
  );
  return loaded;
}
