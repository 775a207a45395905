import {
  type BeforeApplicationShutdown,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Clock, DATABASE_NOW } from '../common/clock.js';
import { Database, select } from '../database/database.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { LeaseWrites } from '../fencing/lease-writes.js';

/** How often each instance looks for queues to hand a lease to: well within R37's 1 s. */
export const SWEEP_MS = 250;

/** Key of the PostgreSQL advisory locks (one per environment) that let one instance at a time sweep a queue. */
const SWEEP_LOCK = 4_711_2028;

/** Nothing to do after all (another instance swept first): roll back, audit nothing. */
class NothingToSweep extends Error {}

/**
 * R37, R39 without traffic: every SWEEP_MS, each environment whose queue has a WAITING
 * ticket and whose lease is free or expired (or whose tickets expired) is handed off by the
 * guard, as the next write there would: one decision (HAND_OFF_LEASE, audited) per
 * environment. On PostgreSQL an instance sweeps an environment only while it holds that
 * environment's advisory lock; the guard's conditional statements keep a grant single
 * whoever sweeps.
 */
@Injectable()
export class LeaseQueueSweeper implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(LeaseQueueSweeper.name);
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly decisions: DecisionRunner,
    private readonly writes: LeaseWrites,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => this.tick(), SWEEP_MS);
    this.timer.unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  /** Stops sweeping by itself (tests that sweep by hand with `sweep`). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopped = true;
    await this.running;
    this.stopped = false;
  }

  private tick(): void {
    if (this.running || this.stopped || !this.timer) return;
    this.running = this.sweep()
      .then(() => undefined)
      .catch((error: unknown) => {
        if (!this.stopped) this.logger.error(`lease queue sweep failed: ${String(error)}`);
      })
      .finally(() => {
        this.running = null;
      });
  }

  /** One sweep; returns how many environments it handed off. */
  async sweep(): Promise<number> {
    // The database's clock is read by the statement itself: an idle sweep is one round trip.
    const now = this.clock.inDatabase ? `(${DATABASE_NOW})` : ':now';
    const due = await this.db.read(async (m) =>
      select<{ environment: string }>(
        m,
        `SELECT DISTINCT t.environment FROM lease_tickets t
         JOIN environments e ON e.name = t.environment
         WHERE t.status = 'WAITING'
           AND (t.expires_at <= ${now} OR e.lease_holder IS NULL OR e.lease_expires_at <= ${now})
         ORDER BY t.environment`,
        this.clock.inDatabase ? {} : { now: await this.clock.now() },
      ),
    );
    let swept = 0;
    for (const { environment } of due) {
      if (this.stopped) break;
      try {
        await this.decisions.decide(
          { action: 'HAND_OFF_LEASE', environment, actor: 'planfence', via: null },
          async (tx) => {
            if (this.db.dialect === 'postgres') {
              const [{ locked }] = await select<{ locked: boolean }>(
                tx.manager,
                'SELECT pg_try_advisory_xact_lock(:key, hashtext(:environment)) AS locked',
                { key: SWEEP_LOCK, environment },
              );
              if (!locked) throw new NothingToSweep();
            }
            const handed = await this.writes.handOffLease(tx, environment, tx.now);
            if (!handed.granted && !handed.expired) throw new NothingToSweep();
            return handed;
          },
          ({ expired, granted }) => ({
            generation: granted?.generation ?? null,
            detail: [
              granted ? `granted to ticket ${granted.id} (${granted.holder})` : '',
              expired ? `${expired} tickets expired` : '',
            ]
              .filter(Boolean)
              .join('; '),
          }),
        );
        swept++;
      } catch (error) {
        if (!(error instanceof NothingToSweep)) throw error;
      }
    }
    return swept;
  }
}
