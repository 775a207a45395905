import type { DatabaseConfig } from '../config/config.js';
import { hasCheckpointThread } from './sqlite-checkpointer.js';

/**
 * SQLite file with the checkpoint thread: the WAL pages at which a writing connection
 * checkpoints on commit (SQLite's default, 1,000, without the thread).
 */
export const WAL_BOUND_PAGES = 4000;

/** The settings of every connection that writes to the service's SQLite database. */
export function sqlitePragmas(db: DatabaseConfig & { kind: 'sqlite' }): string[] {
  return [
    // FULL fsyncs every commit: an acknowledged grant or publication survives power loss.
    `synchronous = ${db.synchronous}`,
    // The driver's build would let the page cache grow to 16 MB: the pages of every large
    // plan written stay there, and are rarely read again.
    `cache_size = -${db.cacheMiB * 1024}`,
    // Each write runs in a savepoint inside the group's transaction, so every page it
    // changes is first copied to the savepoint's journal. Past 64 KiB (a publish changes
    // about 18 pages) SQLite moved that journal to a new temporary file in /var/tmp, opened,
    // written and deleted for every write. In memory it stays a copy: no file, no system
    // calls (docs/performance.md). Sorts and temporary tables that outgrow the page cache
    // would be held in memory too: the service's sorts are of one page of rows or fewer.
    'temp_store = MEMORY',
    // With the checkpoint thread (sqlite-checkpointer.ts) copying pages back beside the
    // writing connections, their own checkpoint on commit is only the bound on the WAL.
    ...(hasCheckpointThread(db) ? [`wal_autocheckpoint = ${WAL_BOUND_PAGES}`] : []),
  ];
}
