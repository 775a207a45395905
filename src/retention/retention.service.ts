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
import { DeploymentsGuard } from '../fencing/deployments.guard.js';

export interface PurgeReport {
  idempotencyRecords: number;
  planContents: number;
}

/**
 * Keeps the database from growing forever: expired idempotency records go, and so does
 * the content (never the metadata or hash) of SUPERSEDED, OBSOLETE and REJECTED plans
 * older than PLANFENCE_PLAN_RETENTION_DAYS. PROPOSED and PUBLISHED plans are never purged.
 */
@Injectable()
export class RetentionService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(RetentionService.name);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
    private readonly deployments: DeploymentsGuard,
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
    await this.db.write((m) => this.deployments.markLapsed(m, null, now));
    const report = await this.db.write(async (m) => ({
      idempotencyRecords: await execute(
        m,
        'DELETE FROM idempotency_records WHERE expires_at <= :now',
        { now },
      ),
      planContents: await execute(
        m,
        `UPDATE plans SET content = '', purged_at = :now
         WHERE status IN ('SUPERSEDED', 'OBSOLETE', 'REJECTED') AND submitted_at < :cutoff AND purged_at IS NULL`,
        { now, cutoff },
      ),
    }));
    if (report.idempotencyRecords || report.planContents) {
      this.logger.log(
        `purged ${report.idempotencyRecords} idempotency records and the content of ${report.planContents} plans`,
      );
    }
    return report;
  }
}
