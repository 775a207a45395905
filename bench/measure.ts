/** What one run of one scenario measured, and how runs become the medians the report shows. */
import { readdirSync, readFileSync } from 'node:fs';

export interface Run {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Peak resident memory of the process that decided (the service, or the bench itself in-process). */
  peakRssMb: number | null;
  /** How each request ended: `ok` or the GraphQL error code (`HTTP_<status>` for non-200 answers). */
  outcomes: Record<string, number>;
  /** CPU time (user + system) of the deciding process(es) per request, ms; null when not measured. */
  cpuMsPerRequest?: number | null;
  /**
   * CPU time (user + system) of the bench process itself per request over the measured
   * seconds, ms: the load generator (autocannon, or the peer's client), or, where the bench
   * decides in-process (the storage floor), the decisions too. It shares the machine's cores
   * with what it measures.
   */
  loadCpuMsPerRequest?: number | null;
  /**
   * PostgreSQL on this machine: the CPU time of all its processes (backends, WAL writer,
   * checkpointer…) per request, ms; null when there is none to read.
   */
  postgresCpuMsPerRequest?: number | null;
  /**
   * The share of the run's wall time the service's request thread (its main thread: HTTP,
   * GraphQL, the guard's statements) was on a CPU, from /proc; the largest of the instances.
   * Near 1, that thread is what bounds the row.
   */
  requestThreadBusy?: number | null;
  /** Writes committed per COMMIT during the run (group commit; on PostgreSQL, submits that waited together), from the services' /metrics, summed. */
  writesPerCommit?: number | null;
  /**
   * SQLite: the writer's mean queue depth, the writes waiting for their group commit to begin
   * averaged over the run (seconds waited, from /metrics, over the run's seconds; summed over instances).
   */
  writeQueueDepth?: number | null;
  /** SQLite: KiB the service process wrote to storage per request answered (writtenBytes). */
  writtenKiBPerRequest?: number | null;
  /** Through the latency proxy: database round trips per request (the services' idle traffic taken out). */
  roundTripsPerRequest?: number | null;
  /** Through the latency proxy: the median time a chunk was really held each way, ms. */
  heldMs?: number | null;
  /** Load that ran beside the measured one (reads under writes): its rate and its share of `ok`. */
  background?: { unit: string; reqPerSec: number; ok: number };
}

/** What every run is given: its load and where it may write. */
export interface Load {
  durability: 'FULL' | 'NORMAL';
  connections: number;
  seconds: number;
  /**
   * Seconds of the same load before the measured `seconds`, not measured: the service's
   * JIT, pools, caches and prepared statements warm, so that a row is the steady state a
   * long-running service serves, not its first seconds.
   */
  warmupSeconds: number;
  runId: string;
  workDir: string;
}

export interface Row {
  scenario: string;
  variant: string;
  durability: 'FULL' | 'NORMAL' | '—';
  connections: number;
  runs: Run[];
  note?: string;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(sortedMs: number[], p: number): number {
  if (!sortedMs.length) return 0;
  return sortedMs[Math.min(sortedMs.length - 1, Math.floor((p / 100) * sortedMs.length))];
}

/** VmHWM of a process: its peak resident set since it started, in MiB. */
export function peakRssMb(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
    return kb ? Number(kb) / 1024 : null;
  } catch {
    return null;
  }
}

/**
 * Bytes a process has caused to be written to storage so far (`write_bytes` of
 * /proc/PID/io: its files' pages as it dirtied them, the WAL's included); NaN when it cannot be read.
 */
export function writtenBytes(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/^write_bytes: (\d+)$/m.exec(io)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

export function addOutcome(outcomes: Record<string, number>, outcome: string): void {
  outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
}

/** The outcome of a GraphQL answer: `ok`, or its first error's code. */
export function graphqlOutcome(status: number, body: string): string {
  if (status !== 200) return `HTTP_${status}`;
  try {
    const parsed = JSON.parse(body) as { errors?: { extensions?: { code?: string } }[] };
    return parsed.errors?.length ? (parsed.errors[0].extensions?.code ?? 'UNCODED') : 'ok';
  } catch {
    return 'UNPARSABLE';
  }
}

/**
 * Runs `decide` from `connections` concurrent loops for `seconds`, timing each call:
 * the driver of the in-process storage floor, of the etcd peer and of the node-pg floor.
 * The same loops run `warmup.seconds` before, untimed; `warmup.done` is called when the
 * measured part starts.
 */
export async function closedLoop(
  connections: number,
  seconds: number,
  decide: (worker: number) => Promise<string>,
  warmup: { seconds: number; done?: () => void } = { seconds: 0 },
  /** A process that decides (the peer): its CPU over the measured seconds is the run's cpuMsPerRequest. */
  decider?: number,
): Promise<Omit<Run, 'peakRssMb'>> {
  /** Every loop calls `decide` until `deadline` (performance.now()), each call's outcome to `each`. */
  const loops = (deadline: number, each: (outcome: string, startedAt: number) => void) =>
    Promise.all(
      Array.from({ length: connections }, async (_, worker) => {
        while (performance.now() < deadline) {
          const t = performance.now();
          each(await decide(worker), t);
        }
      }),
    );
  await loops(performance.now() + warmup.seconds * 1000, () => undefined);
  warmup.done?.();
  const latencies: number[] = [];
  const outcomes: Record<string, number> = {};
  const deciderBefore = decider ? cpuMs(decider) : NaN;
  const load = process.cpuUsage();
  const started = performance.now();
  await loops(started + seconds * 1000, (outcome, t) => {
    latencies.push(performance.now() - t);
    addOutcome(outcomes, outcome);
  });
  const elapsed = (performance.now() - started) / 1000;
  const loadMs = cpuUsageMs(process.cpuUsage(load));
  const deciderMs = decider ? cpuMs(decider) - deciderBefore : NaN;
  latencies.sort((a, b) => a - b);
  return {
    cpuMsPerRequest:
      Number.isFinite(deciderMs) && latencies.length ? deciderMs / latencies.length : null,
    loadCpuMsPerRequest: latencies.length ? loadMs / latencies.length : null,
    reqPerSec: latencies.length / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    outcomes,
  };
}

/**
 * CPU time (user + system) of process `pid`'s main thread alone, in ms (Linux:
 * /proc/PID/task/PID/stat), NaN where it cannot be read: the service's request thread,
 * without its worker threads.
 */
export function mainThreadCpuMs(pid: number): number {
  return cpuMs(`${pid}/task/${pid}`);
}

/** What `process.cpuUsage(since)` measured, user + system, in ms. */
export function cpuUsageMs({ user, system }: NodeJS.CpuUsage): number {
  return (user + system) / 1000;
}

/** User + system CPU time of a process so far, ms (clock ticks of 10 ms); NaN when it cannot be read. */
export function cpuMs(pid: number | string, command?: string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (
      command !== undefined &&
      stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== command
    )
      return NaN;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "(comm) ": utime and stime are fields 14 and 15 of proc(5).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/**
 * The CPU time so far of every PostgreSQL process on this machine, by process id (a backend
 * that started during a run counts from zero; one that ended is left out of both ends).
 */
export function postgresCpu(): Map<string, number> {
  const cpu = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const ms = cpuMs(pid, 'postgres');
    if (Number.isFinite(ms)) cpu.set(pid, ms);
  }
  return cpu;
}

/** PostgreSQL's CPU between two postgresCpu() readings per request, ms; null when none ran here. */
export function postgresCpuPerRequest(
  before: Map<string, number>,
  after: Map<string, number>,
  requests: number,
): number | null {
  if (!after.size || !requests) return null;
  let spent = 0;
  for (const [pid, ms] of after) spent += ms - (before.get(pid) ?? 0);
  return spent / requests;
}
