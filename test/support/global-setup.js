// jest's global setup: names the run's migrated PostgreSQL template database (created by
// the first test app that needs it, test/support/postgres-template.ts) and the prefix of its
// test databases.
export default function globalSetup() {
  if (process.env.PLANFENCE_TEST_POSTGRES_URL) {
    process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE = `planfence_template_${process.pid}_${Date.now()}`;
    // The prefix of the run's test databases, which its global teardown drops together.
    process.env.PLANFENCE_TEST_POSTGRES_DATABASES = `planfence_test_run${process.pid}`;
  }
}
