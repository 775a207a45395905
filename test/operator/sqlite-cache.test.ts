/**
 * SQLite's page cache is what PLANFENCE_SQLITE_CACHE_MIB says (8 MiB unless set), on the
 * connection the service writes and reads with: the pages of the large plans it writes do
 * not stay in the service's memory up to the driver's own default of 16 MB.
 */
import { Database } from '../../src/database/database.js';
import { scratchDatabase, startApp, TEST_DATABASE } from '../support/app.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? describe : describe.skip;

onSqlite('the SQLite page cache', () => {
  test.each([
    ['unset', {}, 8 * 1024],
    ['2', { PLANFENCE_SQLITE_CACHE_MIB: '2' }, 2 * 1024],
  ])('PLANFENCE_SQLITE_CACHE_MIB %s: the connection caches that many KiB', async (_, env, kib) => {
    const database = await scratchDatabase();
    const app = await startApp({ DATABASE_URL: database.url, ...env });
    try {
      const rows = await app.app
        .get(Database)
        .read<{ cache_size: number }[]>((m) => m.query('PRAGMA cache_size'));
      // A negative cache_size is a size in KiB, not a number of pages.
      expect(rows).toEqual([{ cache_size: -kib }]);
    } finally {
      await app.close();
      await database.cleanup();
    }
  });
});
