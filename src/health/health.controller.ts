import { Controller, Get, HttpException, HttpStatus, Inject } from '@nestjs/common';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database } from '../database/database.js';

@Controller('health')
export class HealthController {
  constructor(
    private readonly db: Database,
    @Inject(CONFIG) config: Config,
  ) {
    // A commit clears a client's storage failure only when this much is free (StorageMonitor).
    db.storage.minFreeBytes = config.minFreeBytes;
  }

  /**
   * 200 when the service can serve writes; 503 with the reason when it cannot: the
   * database does not answer, the last write failed for a storage reason (disk full,
   * read-only) and a probe write fails too, or the SQLite file was deleted or replaced; or
   * (SQLite) its file system has less free space than the largest allowed write needs
   * (PLANFENCE_STORAGE_MIN_FREE_BYTES), even though small writes still commit.
   */
  @Get()
  async health(): Promise<{ status: string; database: string }> {
    const problem = (await this.db.storageProblem()) ?? this.db.storage.lowSpace();
    if (problem === null) return { status: 'ok', database: this.db.dialect };
    throw new HttpException(
      { status: 'unavailable', database: this.db.dialect, reason: problem },
      HttpStatus.SERVICE_UNAVAILABLE,
    );
  }
}
