import pg from 'pg';

/** How long the run may take to end by itself once every test file is done. */
const EXIT_GRACE_MS = 15_000;

/**
 * jest's global teardown: drops the run's PostgreSQL databases (the templates and every test
 * database), then watches that the run ends by itself. Every test closes what it opened; if
 * something still keeps the process alive after the grace period, the run names what it is
 * and fails instead of hanging.
 */
export default async function globalTeardown() {
  const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
  const template = process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE;
  const databases = process.env.PLANFENCE_TEST_POSTGRES_DATABASES;
  if (server && template && databases) {
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    let names;
    try {
      // Each worker process made its own copy of the template (test/support/postgres-template.ts);
      // the test databases were left for this teardown (scratchDatabase, test/support/app.ts).
      const { rows } = await admin.query(
        "SELECT datname FROM pg_database WHERE datname LIKE $1 || '%' OR datname LIKE $2 || '\\_%'",
        [template, databases],
      );
      names = rows.map((row) => row.datname);
    } finally {
      await admin.end();
    }
    // Dropped on a few connections at once: the checkpoints their drops ask for are shared.
    const DROPPERS = 4;
    await Promise.all(
      Array.from({ length: DROPPERS }, async (_, i) => {
        const client = new pg.Client({ connectionString: server });
        await client.connect();
        try {
          for (const name of names.filter((_, n) => n % DROPPERS === i))
            await dropDatabase(client, name);
        } finally {
          await client.end();
        }
      }),
    );
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

/**
 * DROP DATABASE … WITH (FORCE), again a little later while an autovacuum worker is connected
 * to it: FORCE may not end a session of another role, and refuses with 42501 (the fault
 * harness drops its databases the same way, test/fault/service.ts).
 */
async function dropDatabase(client, name) {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      return;
    } catch (error) {
      if (error.code !== '42501' || attempt >= 50) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
