import { Controller, Get, HttpException, HttpStatus } from '@nestjs/common';
import { Database } from '../database/database.js';

@Controller('health')
export class HealthController {
  constructor(private readonly db: Database) {}

  /** 200 when the database answers, 503 when it does not. */
  @Get()
  async health(): Promise<{ status: string; database: string }> {
    try {
      await this.db.read((m) => m.query('SELECT 1'));
      return { status: 'ok', database: this.db.dialect };
    } catch {
      throw new HttpException(
        { status: 'unavailable', database: this.db.dialect },
        HttpStatus.SERVICE_UNAVAILABLE,
      );
    }
  }
}
