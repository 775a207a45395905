import perfHooks from 'node:perf_hooks';

/**
 * The run's migrated template database (named by test/support/global-setup.js), created
 * and migrated once per worker process by the first caller: every test app's PostgreSQL database
 * is copied from it (CREATE DATABASE … TEMPLATE) instead of being migrated from scratch.
 * Null when the run names none.
 */
export function migratedTemplate(server: string): Promise<string> | null {
  const run = process.env.PLANFENCE_TEST_POSTGRES_TEMPLATE;
  if (!run) return null;
  // One template per worker process: jest runs files in several at once, and a worker that
  // (re)creates its template must not drop one another worker is copying.
  const name = `${run}_${process.pid}`;
  // Kept on a built-in module, which every test file's module registry shares.
  const holder = perfHooks as unknown as Record<symbol, Promise<string> | undefined>;
  const key = Symbol.for(`planfence.template.${name}`);
  let created = holder[key];
  if (!created) {
    created = createTemplate(server, name);
    Object.defineProperty(holder, key, { value: created });
  }
  return created;
}

async function createTemplate(server: string, name: string): Promise<string> {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  // Loaded here, by the one file per worker that creates the template, not by every file.
  const [{ DataSource }, { migrations }] = await Promise.all([
    import('typeorm'),
    import('../../src/database/data-source.js'),
  ]);
  const source = new DataSource({ type: 'postgres', url: url.toString(), migrations });
  await source.initialize();
  try {
    await source.runMigrations({ transaction: 'each' });
  } finally {
    await source.destroy();
  }
  return name;
}
