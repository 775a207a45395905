import { Controller, Get, HttpException, HttpStatus } from '@nestjs/common';
import { Database } from '../database/database.js';

@Controller('health')
export class HealthController {
  constructor(private readonly db: Database) {}

  /**
   * 200 when the service can serve writes; 503 with the reason when it cannot: the
   * database does not answer, the last write failed for a storage reason (disk full,
   * read-only) and a probe write fails too, or the SQLite file was deleted or replaced.
   */
  @Get()
  async health(): Promise<{ status: string; database: string }> {
    const problem = await this.db.storageProblem();
    if (problem === null) return { status: 'ok', database: this.db.dialect };
    throw new HttpException(
      { status: 'unavailable', database: this.db.dialect, reason: problem },
      HttpStatus.SERVICE_UNAVAILABLE,
    );
  }
}
