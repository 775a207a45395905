#!/usr/bin/env node
/**
 * planfence-restore — run once after a database was restored from a backup, before the
 * service starts on it: raises every environment's generation counter and fence by a
 * margin, so that no generation handed out after the backup is issued again
 * (docs/operations.md, "Backup and restore").
 */
import { hostname, userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCommandConfig } from '../config/config.js';

const HELP = `planfence-restore — after restoring a backup, raise every environment's
generation counter and fence by a margin (the service must be stopped on SQLite)

Usage: npm run restore -- --margin N [--database URL]

  --margin N        how far to raise each counter, 1 to 1000000000: more than the
                    generations any environment may have issued since the backup
  --database URL    the database (default: $DATABASE_URL, else sqlite:./data/planfence.db)

Exit codes: 0 raised; 2 bad usage; 1 failed (nothing was changed)`;

function actor(): string {
  try {
    return `operator:${userInfo().username}@${hostname()}`;
  } catch {
    return `operator@${hostname()}`;
  }
}

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        margin: { type: 'string' },
        database: { type: 'string' },
        help: { type: 'boolean' },
      },
    }));
  } catch (error) {
    console.error(`planfence-restore: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const margin = Number(values.margin);
  if (!values.margin || !/^\d+$/.test(values.margin) || margin < 1 || margin > 1_000_000_000) {
    console.error(`planfence-restore: --margin must be an integer from 1 to 1000000000\n\n${HELP}`);
    return 2;
  }
  const config = loadCommandConfig('planfence-restore', values.database);
  if (!config) return 2;
  // The database's modules are loaded only now: a usage error answers at once.
  const [{ DataSource }, { dataSourceOptions }, { raiseAfterRestore, RestoreMarginTooLarge }] =
    await Promise.all([
      import('typeorm'),
      import('../database/data-source.js'),
      import('../fencing/restore.js'),
    ]);
  const dataSource = new DataSource(dataSourceOptions(config));
  await dataSource.initialize();
  try {
    const raised = await dataSource.transaction((m) =>
      raiseAfterRestore(m, { margin, actor: actor(), now: Date.now() }),
    );
    for (const e of raised) {
      console.log(
        `${e.name}: last issued generation ${e.lastIssuedGeneration}, fence ${e.fence}; leases ended`,
      );
    }
    console.log(`raised ${raised.length} environment(s) by ${margin}`);
    return 0;
  } catch (error) {
    if (error instanceof RestoreMarginTooLarge) {
      console.error(`planfence-restore: ${error.message}`);
      return 1;
    }
    throw error;
  } finally {
    await dataSource.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(
      'planfence-restore: failed, nothing was changed:',
      error instanceof Error ? error.message : error,
    );
    process.exit(1);
  },
);
