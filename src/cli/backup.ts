#!/usr/bin/env node
/**
 * planfence-backup — a consistent copy of the service's SQLite database, taken while the
 * service runs (SQLite's online backup; the service's writes go on). PostgreSQL: pg_dump.
 * See docs/operations.md, "Backup and restore".
 */
import { existsSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Sqlite from 'better-sqlite3';
import { loadCommandConfig } from '../config/config.js';
import { createPrivateFile } from '../database/sqlite-files.js';

const HELP = `planfence-backup — copy the SQLite database while the service runs

Usage: npm run backup -- --to FILE [--database URL]

  --to FILE         the copy to write (must not exist; written readable by its owner only)
  --database URL    the database (default: $DATABASE_URL, else sqlite:./data/planfence.db)

PostgreSQL databases are backed up with pg_dump.
Exit codes: 0 written; 2 bad usage; 1 failed (no copy is left behind)`;

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { to: { type: 'string' }, database: { type: 'string' }, help: { type: 'boolean' } },
    }));
  } catch (error) {
    console.error(`planfence-backup: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const config = loadCommandConfig('planfence-backup', values.database);
  if (!config) return 2;
  const db = config.database;
  if (db.kind !== 'sqlite' || db.path === ':memory:') {
    console.error('planfence-backup: only SQLite files; back PostgreSQL up with pg_dump');
    return 2;
  }
  if (!values.to) {
    console.error(`planfence-backup: --to FILE is required\n\n${HELP}`);
    return 2;
  }
  const to = resolve(values.to);
  if (existsSync(to)) {
    console.error(`planfence-backup: ${to} exists; choose a new file`);
    return 2;
  }
  if (!existsSync(db.path)) {
    console.error(`planfence-backup: there is no database at ${db.path}`);
    return 1;
  }
  // Readers do not need the service's lock: the copy is one consistent snapshot.
  const source = new Sqlite(db.path, { readonly: true, fileMustExist: true });
  createPrivateFile(to);
  try {
    await source.backup(to);
  } catch (error) {
    rmSync(to, { force: true });
    throw error;
  } finally {
    source.close();
  }
  console.log(`backed up ${db.path} to ${to}`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('planfence-backup: failed:', error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
