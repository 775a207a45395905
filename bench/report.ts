/** docs/BENCHMARKS.md: the machine, the table of medians with its ratios, and the targets. */
import { median, type Row } from './measure.js';

export interface Machine {
  date: string;
  cores: string;
  memory: string;
  kernel: string;
  node: string;
  sqlite: string;
  etcd: string;
  fsyncs: number;
  seconds: number;
  runs: number;
  command: string;
  minutes: number;
  git: string;
}

interface Summary extends Row {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMb: number | null;
  outcomes: Record<string, number>;
}

function summarize(row: Row): Summary {
  const outcomes: Record<string, number> = {};
  for (const run of row.runs)
    for (const [outcome, count] of Object.entries(run.outcomes))
      outcomes[outcome] = (outcomes[outcome] ?? 0) + count;
  const rss = row.runs.map((run) => run.peakRssMb).filter((v): v is number => v != null);
  return {
    ...row,
    reqPerSec: median(row.runs.map((run) => run.reqPerSec)),
    p50Ms: median(row.runs.map((run) => run.p50Ms)),
    p99Ms: median(row.runs.map((run) => run.p99Ms)),
    peakRssMb: rss.length ? median(rss) : null,
    outcomes,
  };
}

const fixed = (value: number, digits: number) => value.toFixed(digits);
const ratio = (value: number | undefined) => (value == null ? '—' : `${value.toFixed(2)}×`);

function outcomeText(outcomes: Record<string, number>): string {
  const total = Object.values(outcomes).reduce((a, b) => a + b, 0);
  return Object.entries(outcomes)
    .sort((a, b) => b[1] - a[1])
    .map(([outcome, count]) => `${outcome} ${Math.round((count / total) * 100)}%`)
    .join(', ');
}

export function report(rows: Row[], machine: Machine): string {
  const summaries = rows.map(summarize);
  const find = (scenario: string, connections: number, durability?: string, variant?: string) =>
    summaries.find(
      (s) =>
        s.scenario.startsWith(scenario) &&
        s.connections === connections &&
        (durability == null || s.durability === durability) &&
        (variant == null || s.variant === variant),
    );
  const frameworkFloor = (s: Summary) => find('1 ', s.connections)?.reqPerSec;
  const storageFloor = (s: Summary) => {
    const stale = s.variant.endsWith('stale') ? s.variant : '0% stale';
    const durability = s.durability === 'NORMAL' ? 'NORMAL' : 'FULL';
    return find('6 ', s.connections, durability, stale)?.reqPerSec;
  };
  const divide = (a: number, b: number | undefined) => (b ? a / b : undefined);

  const lines: string[] = [];
  lines.push('# planfence benchmarks', '');
  lines.push(
    `Produced by \`${machine.command}\` on ${machine.date.slice(0, 10)} (${machine.git}), ` +
      `in ${machine.minutes.toFixed(1)} minutes. Every figure is the median of ${machine.runs} ` +
      `runs of ${machine.seconds} s, interleaved across rows. Regenerate with \`npm run bench\`.`,
    '',
  );
  lines.push('## Machine', '');
  lines.push(
    `- CPU: ${machine.cores}; memory ${machine.memory}; ${machine.kernel}`,
    `- Node ${machine.node}; SQLite ${machine.sqlite} (WAL); etcd ${machine.etcd}`,
    `- Disk: ${machine.fsyncs.toFixed(0)} synchronous 4 KiB writes/s (write + fdatasync, measured when the report was written, after the runs)`,
    '- Durability: FULL = `synchronous=FULL` (the default: every acknowledged commit is on disk), ' +
      'NORMAL = `synchronous=NORMAL` (opt-in: survives a crash of the process, may lose the last commits on power loss). ' +
      'etcd: one member, its default fsync per commit.',
    '- Load: autocannon from the bench process over loopback, one request in flight per connection; ' +
      'the service is the built `dist/src/main.js` as a child process with its normal logging (to /dev/null). ' +
      'Peak RSS is the service process\u2019s VmHWM (etcd\u2019s for scenario 7; none for the in-process storage floor). ' +
      'autocannon records HTTP latencies in whole milliseconds (rounded down); scenarios 6 and 7 are timed in the bench process with sub-millisecond resolution.',
    '',
  );
  lines.push('## Results', '');
  lines.push(
    '| scenario | variant | durability | c | req/s | p50 ms | p99 ms | peak RSS MiB | ÷ framework floor | ÷ storage floor | outcomes |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|',
  );
  const order = [...summaries].sort(
    (a, b) =>
      a.scenario.localeCompare(b.scenario) ||
      a.variant.localeCompare(b.variant, 'en', { numeric: true }) ||
      a.durability.localeCompare(b.durability) ||
      a.connections - b.connections,
  );
  for (const s of order) {
    lines.push(
      `| ${s.scenario} | ${s.variant} | ${s.durability} | ${s.connections} | ${fixed(s.reqPerSec, 0)} | ` +
        `${fixed(s.p50Ms, 2)} | ${fixed(s.p99Ms, 2)} | ${s.peakRssMb == null ? '—' : fixed(s.peakRssMb, 0)} | ` +
        `${ratio(divide(s.reqPerSec, frameworkFloor(s)))} | ${ratio(divide(s.reqPerSec, storageFloor(s)))} | ` +
        `${outcomeText(s.outcomes)} |`,
    );
  }
  lines.push('');
  lines.push(
    'Scenario 3 counts the submit and the approval as two requests (two decisions). ' +
      'Scenario 6 runs the same statements synchronously on one connection, so its concurrency only interleaves ' +
      'callers; it commits once per decision. Scenarios 2, 4 and 5 use a fresh idempotency key per request; ' +
      'a stale request is a rejection that still commits its audit event and idempotency record.',
    '',
  );

  lines.push('## Targets (concurrency 10, FULL)', '');
  const publish = find('2 ', 10, 'FULL', '0% stale');
  const publishStale = find('2 ', 10, 'FULL', '50% stale');
  const check = (ok: boolean | undefined) => (ok == null ? 'not measured' : ok ? 'met' : 'NOT met');
  if (publish) {
    const toFloor = divide(publish.reqPerSec, frameworkFloor(publish));
    lines.push(
      `- Fenced publish ≥ 60% of the framework floor: ${ratio(toFloor)} — ${check(toFloor == null ? undefined : toFloor >= 0.6)}`,
      `- Fenced publish p99 ≤ 25 ms: ${fixed(publish.p99Ms, 2)} ms — ${check(publish.p99Ms <= 25)}`,
    );
    for (const [ours, variant] of [
      [publish, '0% stale'],
      [publishStale, '50% stale'],
    ] as const) {
      const peer = find('7 ', 10, 'FULL', variant);
      const toPeer = ours && peer ? ours.reqPerSec / peer.reqPerSec : undefined;
      lines.push(
        `- Fenced publish ≥ 1.5× etcd (${variant}): ${ratio(toPeer)} — ${check(toPeer == null ? undefined : toPeer >= 1.5)}`,
      );
    }
  }
  const floor10 = find('1 ', 10);
  const storageNormal = find('6 ', 10, 'NORMAL', '0% stale');
  const storageFull = find('6 ', 10, 'FULL', '0% stale');
  if (floor10 && storageNormal) {
    // A fenced publish is at least a framework-floor request plus the decision's statements.
    const bound = 1 / (1 / floor10.reqPerSec + 1 / storageNormal.reqPerSec);
    lines.push(
      `- What bounds a publish on one service process: it costs at least one framework-floor request ` +
        `(${fixed(floor10.reqPerSec, 0)}/s) plus the decision's statements without fsync ` +
        `(storage floor NORMAL, ${fixed(storageNormal.reqPerSec, 0)}/s), i.e. at most ` +
        `${fixed(bound, 0)} publishes/s = ${fixed((bound / floor10.reqPerSec) * 100, 0)}% of the framework floor, ` +
        `with group commit taking the fsync out` +
        (storageFull
          ? ` (one commit per decision, FULL: ${fixed(storageFull.reqPerSec, 0)}/s).`
          : '.'),
    );
    const peer = find('7 ', 10, 'FULL', '0% stale');
    if (peer)
      lines.push(
        `- The framework floor itself is ${ratio(floor10.reqPerSec / peer.reqPerSec)} etcd's decision rate at c=10.`,
      );
  }
  const sizes = summaries.filter((s) => s.scenario.startsWith('5 ') && s.connections === 10);
  if (sizes.length >= 2) {
    const smallest = sizes[0];
    const largest = sizes[sizes.length - 1];
    const growth = largest.p50Ms / smallest.p50Ms - 1;
    lines.push(
      `- Growth ${smallest.variant} → ${largest.variant} costs ≤ 20% in median latency: ` +
        `${fixed(smallest.p50Ms, 2)} → ${fixed(largest.p50Ms, 2)} ms (${growth >= 0 ? '+' : ''}${fixed(growth * 100, 0)}%) — ${check(growth <= 0.2)}`,
    );
  }
  lines.push('');
  return `${lines.join('\n')}\n`;
}
