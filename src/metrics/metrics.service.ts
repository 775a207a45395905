import { Injectable } from '@nestjs/common';
import { perProcess } from '../common/per-process.js';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Database } from '../database/database.js';
import { Environment } from '../model/environment.entity.js';

/**
 * The process's own metrics (CPU, memory, event loop, GC), collected once per process:
 * their collectors observe the whole process and are never removed, so a second app in the
 * same process (tests, benchmarks) shares them instead of keeping another set alive.
 */
function processRegistry(): Registry {
  return perProcess('processMetrics', () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'planfence_' });
    return registry;
  });
}

/** Prometheus metrics of this instance (`GET /metrics`). */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly decisions = new Counter({
    name: 'planfence_decisions_total',
    help: 'Fenced decisions by action, outcome (ACCEPTED, REJECTED) and rejection code',
    labelNames: ['action', 'outcome', 'code'] as const,
    registers: [this.registry],
  });

  readonly leaseGrants = new Counter({
    name: 'planfence_lease_grants_total',
    help: 'Leases granted (each one a new generation), by environment',
    labelNames: ['environment'] as const,
    registers: [this.registry],
  });

  readonly decisionSeconds = new Histogram({
    name: 'planfence_decision_duration_seconds',
    help: 'Time from the start of a decision to its commit, by action',
    labelNames: ['action'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  readonly deployments = new Counter({
    name: 'planfence_deployments_total',
    help: 'Deployments ended, by outcome (SUCCEEDED, FAILED), reported by their starter or reconciled',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  /**
   * Subscriptions whose live feed this instance opened, by field: counted once the feed
   * listens, so an event committed after the count moved reaches the subscriber.
   */
  readonly subscriptions = new Counter({
    name: 'planfence_subscriptions_total',
    help: 'Subscriptions whose live feed this instance opened (listening from then on), by field',
    labelNames: ['field'] as const,
    registers: [this.registry],
  });

  /** The scrape: this instance's metrics, then the process's. */
  async text(): Promise<string> {
    return `${await this.registry.metrics()}\n${await processRegistry().metrics()}`;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** One read of the environments per scrape, shared by the gauges that collect together. */
  private scrape: Promise<Environment[]> | null = null;

  constructor(private readonly db: Database) {
    this.environmentGauge(
      'planfence_generation',
      'Last generation issued, by environment',
      (env) => env.lastIssuedGeneration,
    );
    this.environmentGauge(
      'planfence_fence',
      'Current fence (lowest generation that may still write), by environment',
      (env) => env.fence,
    );
    new Gauge({
      name: 'planfence_decisions_waiting',
      help: 'Decisions waiting in this instance for a turn of their environment to reach PostgreSQL (PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT at once); 0 on SQLite',
      registers: [this.registry],
      collect() {
        this.set(db.decisionsWaiting);
      },
    });
    new Gauge({
      name: 'planfence_writer_thread_up',
      help: "1 while a SQLite file's writer thread takes submits; 0 once it stopped (the service logs why and decides every submit on the request thread until it restarts), and on PostgreSQL, in memory or with PLANFENCE_SQLITE_WRITER_THREAD=0",
      registers: [this.registry],
      collect() {
        this.set(db.writesOnThread ? 1 : 0);
      },
    });
    const commits = db.commits;
    const checkpoints = db.checkpointer?.done ?? { runs: 0, frames: 0 };
    for (const [name, help, value] of [
      [
        'planfence_commits_total',
        'Database transactions committed (on SQLite, the writes that arrive together share one commit; on PostgreSQL, the submits of one environment that wait for its turn together)',
        () => commits.transactions,
      ],
      [
        'planfence_committed_writes_total',
        'Writes committed (decisions, token and environment changes, retention runs)',
        () => commits.writes,
      ],
      [
        'planfence_writer_thread_writes_total',
        "Submits handed to a SQLite file's writer thread (PLANFENCE_SQLITE_WRITER_THREAD), in groups that committed; one it does not admit writes nothing and is decided on the request thread. 0 on PostgreSQL and in memory",
        () => commits.onThread,
      ],
      [
        'planfence_write_queue_seconds_total',
        "Seconds that writes waited in a SQLite service's queue for their group commit to begin; its rate is the queue's mean depth (0 on PostgreSQL: planfence_decisions_waiting)",
        () => commits.queuedMs / 1000,
      ],
      [
        'planfence_sqlite_checkpoints_total',
        "Checkpoints of a SQLite file's WAL by the checkpoint thread that copied pages back into the database file (PLANFENCE_SQLITE_CHECKPOINT_MS); 0 on PostgreSQL and in memory",
        () => checkpoints.runs,
      ],
      [
        'planfence_sqlite_checkpointed_pages_total',
        "Pages the checkpoint thread copied from a SQLite file's WAL back into the database file",
        () => checkpoints.frames,
      ],
    ] as const) {
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(value());
        },
      });
    }
  }

  private environments(): Promise<Environment[]> {
    this.scrape ??= this.db
      .read((m) =>
        m.find(Environment, { select: { name: true, fence: true, lastIssuedGeneration: true } }),
      )
      .finally(() => {
        this.scrape = null;
      });
    return this.scrape;
  }

  private environmentGauge(name: string, help: string, value: (env: Environment) => number): void {
    const environments = () => this.environments();
    new Gauge({
      name,
      help,
      labelNames: ['environment'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const env of await environments()) this.set({ environment: env.name }, value(env));
      },
    });
  }

  deploymentEnded(outcome: string): void {
    this.deployments.inc({ outcome });
  }

  /** Gauges of the deployments IN_PROGRESS with a live heartbeat and of those UNKNOWN, read by `count` at each scrape. */
  deploymentGauges(count: () => Promise<{ active: number; unknown: number }>): void {
    for (const [name, help, key] of [
      ['planfence_deployments_active', 'Deployments IN_PROGRESS with a live heartbeat', 'active'],
      [
        'planfence_deployments_unknown',
        'Deployments whose heartbeat lapsed before a report and that are not reconciled',
        'unknown',
      ],
    ] as const) {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          this.set((await count())[key]);
        },
      });
    }
  }

  /** Counts one decision that has committed (accepted or rejected). */
  decided(action: string, environment: string, code: string | null, startedAt: number): void {
    this.decisions.inc({ action, outcome: code ? 'REJECTED' : 'ACCEPTED', code: code ?? '' });
    this.decisionSeconds.observe({ action }, (performance.now() - startedAt) / 1000);
    if (action === 'ACQUIRE_LEASE' && !code) this.leaseGrants.inc({ environment });
  }
}
