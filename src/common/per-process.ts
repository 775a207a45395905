import perfHooks from 'node:perf_hooks';

/**
 * One value per process, made by `make` the first time `name` is asked for. It is kept on a
 * built-in module, which every module registry of the process shares: a test runner gives
 * each test file a registry of its own, and so its own copy of every module of ours.
 */
export function perProcess<T>(name: string, make: () => T): T {
  const holder = perfHooks as unknown as Record<symbol, T | undefined>;
  const key = Symbol.for(`planfence.${name}`);
  let value = holder[key];
  if (value === undefined) {
    value = make();
    Object.defineProperty(holder, key, { value });
  }
  return value;
}
