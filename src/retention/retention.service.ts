import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute } from '../database/database.js';
import { PlanWrites } from '../fencing/plan-writes.js';
import { purgePlanContents } from '../fencing/retention-writes.js';
import { DeploymentWrites } from '../fencing/deployment-writes.js';
import { DecisionRunner } from '../decisions/decision.runner.js';

export interface PurgeReport {
  idempotencyRecords: number;
  planContents: number;
}

/**
 * Keeps the database from growing forever: expired idempotency records go, and so does
 * the content and artifact (never the metadata, summary or hashes) of plans in PURGED_STATUSES (fencing/retention-writes.ts) submitted more than
 * PLANFENCE_PLAN_RETENTION_DAYS ago; expired proposals are first stored as EXPIRED. The
 * published plan's content is never purged. Outbox events and DELIVERED or FAILED webhook
 * deliveries older than the same period go too; a PENDING delivery and its event stay.
 */
@Injectable()
export class RetentionService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(RetentionService.name);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
    private readonly plans: PlanWrites,
    private readonly deployments: DeploymentWrites,
    private readonly decisions: DecisionRunner,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      this.purge().catch((error: unknown) =>
        this.logger.error(`retention failed: ${String(error)}`),
      );
    }, this.config.retentionIntervalMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  async purge(): Promise<PurgeReport> {
    const now = await this.clock.now();
    const cutoff = now - this.config.planRetentionMs;
    // Deployments whose heartbeat lapsed are stored UNKNOWN (they already read so).
    await this.decisions.write(now, (tx) => this.deployments.markLapsed(tx, null, now));
    let expired = 0;
    const report = await this.decisions.write(now, async (tx) => {
      expired = await this.plans.expireProposals(tx, now);
      return {
        idempotencyRecords: await execute(
          tx.manager,
          'DELETE FROM idempotency_records WHERE expires_at <= :now',
          { now },
        ),
        planContents: await purgePlanContents(tx, now, cutoff),
      };
    });
    const outbox = await this.db.write(async (m) => ({
      deliveries: await execute(
        m,
        `DELETE FROM webhook_deliveries
         WHERE status IN ('DELIVERED', 'FAILED') AND created_at < :cutoff`,
        { cutoff },
      ),
      // An event goes once its deliveries were queued (or no webhook exists to want it) and
      // no delivery needs it any more (a FAILED one may be redelivered).
      events: await execute(
        m,
        `DELETE FROM outbox_events WHERE at < :cutoff
           AND (fanned_out = 1 OR NOT EXISTS (SELECT 1 FROM webhooks))
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = outbox_events.id)`,
        { cutoff },
      ),
    }));
    // The record of OIDC exchanges (one row per attempt) is kept as long as plan content.
    const exchanges = await this.db.write((m) =>
      execute(m, 'DELETE FROM oidc_exchanges WHERE at < :cutoff', { cutoff }),
    );
    if (exchanges) this.logger.log(`purged ${exchanges} OIDC exchange records`);
    if (outbox.deliveries || outbox.events) {
      this.logger.log(
        `purged ${outbox.events} outbox events and ${outbox.deliveries} finished webhook deliveries`,
      );
    }
    if (expired) this.logger.log(`${expired} proposals expired (R16)`);
    if (report.idempotencyRecords || report.planContents) {
      this.logger.log(
        `purged ${report.idempotencyRecords} idempotency records and the content of ${report.planContents} plans`,
      );
    }
    return report;
  }
}
