/**
 * /health during an attack, as the hostile tests judge it.
 *
 * In `npm test`, by order, not by time: /health is answered (200) between two turns of the
 * attack's work on the service's event loop (common/loop-turns.ts), which a service that ran the
 * attack's work start to end, or a turn of it for seconds, would not do. The load of a
 * shared machine slows both alike and changes no order.
 *
 * On demand (`npm run test:stalls`, HOSTILE_STALL_BOUNDS=1, on a quiet machine), by time
 * too: the worst answer as a ratio to a baseline measured in the same test. A ratio to a
 * round trip of a few milliseconds is decided by the scheduler when other processes share
 * the cores, so it is a measurement, not a test of `npm test`.
 */
import type { TestApp } from '../support/app.js';

/** Whether the stall ratios are asserted (the on-demand run) or only reported. */
export const STALL_BOUNDS = process.env.HOSTILE_STALL_BOUNDS === '1';

/** One /health round trip, in milliseconds; throws unless it answered 200. */
export async function healthMs(url: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/health`);
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`/health answered ${response.status}`);
  return performance.now() - started;
}

/**
 * The 90th percentile of `n` sequential /health round trips: what an idle service answers
 * in on this machine at this moment (the percentile, not the median, so that the noise of a
 * shared machine is in the baseline as it is in the samples it is compared with).
 */
export async function healthBaseline(url: string, n = 20): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await healthMs(url));
  samples.sort((a, b) => a - b);
  return samples[Math.floor(n * 0.9)];
}

/**
 * What a probe saw: each round trip's milliseconds, the count of the attack's steps when
 * each ended, and that count when the probe started and when it was stopped (the attack's
 * span).
 */
export interface ProbeResult {
  samples: number[];
  turns: number[];
  window: { from: number; to: number };
}

/**
 * Asks /health again and again (one at a time, `pauseMs` apart) until `stop` is called,
 * which returns every round trip measured, the one in flight included, with the count of
 * the attack's steps (`progress`: turnsOf(app), say) when each was answered. Start it just
 * before the attack and stop it as soon as the attack is over: the count at those two
 * moments is the attack's span.
 *
 * `lessCollections`: each round trip less the garbage collector's pauses in this process
 * that fell within it. The service and the test share the process, so a collection of what
 * either made stops both; a test of what the service's own code holds the event loop for
 * (one replayed event per turn) judges that code, not when the collector ran.
 */
export function healthProbe(
  url: string,
  pauseMs = 10,
  {
    lessCollections = false,
    progress = () => 0,
  }: { lessCollections?: boolean; progress?: () => number } = {},
): { stop(): Promise<ProbeResult> } {
  const spans: [number, number][] = [];
  const turns: number[] = [];
  const from = progress();
  const pauses: [number, number][] = [];
  const note = (entries: readonly { startTime: number; duration: number }[]) => {
    for (const entry of entries) pauses.push([entry.startTime, entry.startTime + entry.duration]);
  };
  const observer = lessCollections
    ? new PerformanceObserver((list) => note(list.getEntries()))
    : null;
  observer?.observe({ entryTypes: ['gc'] });
  let running = true;
  const loop = (async () => {
    while (running) {
      const ms = await healthMs(url);
      const ended = performance.now();
      turns.push(progress());
      spans.push([ended - ms, ended]);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  })();
  return {
    async stop() {
      const window = { from, to: progress() };
      running = false;
      await loop;
      if (observer) {
        note(observer.takeRecords());
        observer.disconnect();
      }
      const samples = spans.map(([from, to]) => {
        let paused = 0;
        for (const [start, end] of pauses)
          paused += Math.max(0, Math.min(to, end) - Math.max(from, start));
        return to - from - paused;
      });
      return { samples, turns, window };
    },
  };
}

/** The worst of `samples` as a multiple of `baseline`. */
export function stallRatio(samples: number[], baseline: number): number {
  return Math.max(...samples) / baseline;
}

/** The count of an attack's steps that `app` took: its service's turns of the event loop. */
export const turnsOf = (app: TestApp) => () => app.turnsTaken();

/**
 * How many /health answers the service gave between two turns of an attack's work: after
 * its first turn and before its last.
 */
export function answeredBetweenTurns({ turns, window }: ProbeResult): number {
  return turns.filter((t) => t > window.from && t < window.to).length;
}

/**
 * The attack's judgement of /health: answered between its turns at least `atLeast` times
 * (always), and (HOSTILE_STALL_BOUNDS=1) its worst answer under `maxRatio` × `baseline`.
 * Returns what it measured, for HOSTILE_VERBOSE.
 */
export function judgeHealth(
  probe: ProbeResult,
  baseline: number,
  { atLeast, maxRatio }: { atLeast: number; maxRatio: number },
): { between: number; turns: number; ratio: number } {
  const { window } = probe;
  const between = answeredBetweenTurns(probe);
  const ratio = stallRatio(probe.samples, baseline);
  expect(window.to - window.from).toBeGreaterThan(1);
  expect(between).toBeGreaterThanOrEqual(atLeast);
  if (STALL_BOUNDS) expect(ratio).toBeLessThan(maxRatio);
  return { between, turns: window.to - window.from, ratio };
}

/** p99 of `samples`. */
export function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
}
