import pg from 'pg';

/** How long the run may take to end by itself once every test file is done. */
const EXIT_GRACE_MS = 15_000;

/**
 * jest's global teardown: drops the run's template databases, then watches that the run ends
 * by itself. Every test closes what it opened; if something still keeps the process alive
 * after the grace period, the run names what it is and fails instead of hanging.
 */
export default async function globalTeardown() {
  const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
  const name = process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE;
  if (server && name) {
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    try {
      // Each worker process made its own copy (test/support/postgres-template.ts).
      const { rows } = await admin.query(
        "SELECT datname FROM pg_database WHERE datname LIKE $1 || '%'",
        [name],
      );
      for (const { datname } of rows)
        await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  }
  setTimeout(() => {
    const left = process
      .getActiveResourcesInfo()
      .filter((kind) => kind !== 'TTYWrap' && kind !== 'PipeWrap');
    console.error(
      `the test run did not end by itself ${EXIT_GRACE_MS / 1000} s after its last test: still open: ${left.join(', ')}`,
    );
    process.exit(1);
  }, EXIT_GRACE_MS).unref();
}
