/**
 * /health latency as the hostile tests judge it: never an absolute time, always a ratio to
 * a baseline measured in the same test on the same (shared, loaded) machine.
 */

/** One /health round trip, in milliseconds. */
export async function healthMs(url: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/health`);
  await response.arrayBuffer();
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
 * Asks /health again and again (one at a time, `pauseMs` apart) until `stop` is called,
 * which returns every round trip measured, the one in flight included.
 *
 * `lessCollections`: each round trip less the garbage collector's pauses in this process
 * that fell within it. The service and the test share the process, so a collection of what
 * either made stops both; a test of what the service's own code holds the event loop for
 * (one replayed event per turn) judges that code, not when the collector ran.
 */
export function healthProbe(
  url: string,
  pauseMs = 10,
  { lessCollections = false } = {},
): { stop(): Promise<number[]> } {
  const spans: [number, number][] = [];
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
      spans.push([ended - ms, ended]);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      if (observer) {
        note(observer.takeRecords());
        observer.disconnect();
      }
      return spans.map(([from, to]) => {
        let paused = 0;
        for (const [start, end] of pauses)
          paused += Math.max(0, Math.min(to, end) - Math.max(from, start));
        return to - from - paused;
      });
    },
  };
}

/** The worst of `samples` as a multiple of `baseline`. */
export function stallRatio(samples: number[], baseline: number): number {
  return Math.max(...samples) / baseline;
}

/** p99 of `samples`. */
export function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
}
