import pg from 'pg';

// Drops the run's template database (test/support/global-setup.js).
export default async function globalTeardown() {
  const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
  const name = process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE;
  if (!server || !name) return;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}
