import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';

/** Key of the PostgreSQL advisory lock that instances starting together take around migrations. */
const MIGRATION_LOCK = 4_711_2026;

/**
 * The one migration path: pending migrations run at start, before anything else touches the
 * database; on PostgreSQL under an advisory lock, so that instances starting together
 * migrate one after the other (the later ones find nothing to do).
 */
export async function migrate(dataSource: DataSource, logger: Logger): Promise<void> {
  if (dataSource.options.type !== 'postgres') {
    await dataSource.runMigrations({ transaction: 'each' });
    return;
  }
  const session = dataSource.createQueryRunner();
  await session.connect();
  try {
    await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    if (applied.length) logger.log(`applied migrations: ${applied.map((m) => m.name).join(', ')}`);
  } finally {
    await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await session.release();
  }
}
