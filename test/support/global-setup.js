// jest's global setup of the postgres project: names the run's migrated template database
// (created by the first test app that needs it, test/support/postgres-template.ts).
export default function globalSetup() {
  process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE = `planfence_template_${process.pid}_${Date.now()}`;
}
