/**
 * The PostgreSQL floor: node-pg's own rate for the decision's one conditional UPDATE,
 * `UPDATE environments SET fence = $1 WHERE name = $2 AND fence <= $1`, each in its own
 * (autocommit) transaction from a pool of 10 connections, on a copy of the prepared
 * database. No HTTP, no GraphQL, no TypeORM, none of the publish's other statements.
 */
import { closedLoop, type Load, postgresCpu, postgresCpuPerRequest, type Run } from './measure.js';
import { runDatabase, type Template } from './http.js';

export async function runPostgresFloor(
  options: Omit<Load, 'durability'> & { template: Template },
): Promise<Run> {
  const { default: pg } = await import('pg');
  const database = await runDatabase(options.template, options.workDir, options.runId);
  const pool = new pg.Pool({ connectionString: database.location, max: 10 });
  // An idle client's error (the server closing it) must not end the bench; a query's error still throws.
  pool.on('error', () => undefined);
  try {
    const environment = options.template.environments[0];
    let before = postgresCpu();
    const run = await closedLoop(
      options.connections,
      options.seconds,
      async () => {
        const result = await pool.query(
          'UPDATE environments SET fence = $1 WHERE name = $2 AND fence <= $1',
          [options.template.fresh, environment],
        );
        return result.rowCount === 1 ? 'ok' : 'STALE_GENERATION';
      },
      { seconds: options.warmupSeconds, done: () => (before = postgresCpu()) },
    );
    const requests = Object.values(run.outcomes).reduce((sum, n) => sum + n, 0);
    return {
      ...run,
      peakRssMb: null,
      postgresCpuMsPerRequest: postgresCpuPerRequest(before, postgresCpu(), requests),
    };
  } finally {
    await pool.end();
    await database.remove();
  }
}
