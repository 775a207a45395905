import { readFileSync } from 'node:fs';

/**
 * CPU time of thread `tid` of this process in ms (Linux: the first field of its schedstat,
 * in nanoseconds), or null where it cannot be read. Worker budgets count it, so that time a
 * worker spends waiting for a core (busy workers and the request thread sharing two cores)
 * is not charged to the job it runs.
 */
export function threadCpuMs(tid: number): number | null {
  try {
    return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return null;
  }
}

/** How many times its budget in wall-clock time a job may wait for a core before the budget counts as spent. */
export const WALL_FACTOR = 20;

/**
 * Milliseconds left of a `budget` that started at the worker's CPU time `cpu` and wall time
 * `wall`: by the worker thread's CPU time where it can be read (`tid`), else by the wall
 * clock. A worker kept off the CPU for WALL_FACTOR times its budget has spent it all the same.
 */
export function budgetLeft(
  tid: number | null | undefined,
  cpu: number,
  wall: number,
  budget: number,
): number {
  const elapsed = performance.now() - wall;
  const now = tid == null ? null : threadCpuMs(tid);
  if (now === null) return budget - elapsed;
  if (elapsed >= budget * WALL_FACTOR) return 0;
  return budget - (now - cpu);
}
