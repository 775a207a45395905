/**
 * A write on SQLite makes no temporary file. Each write runs in a savepoint inside its group's
 * transaction; the pages it changes are copied to the savepoint's journal, which SQLite would
 * move to a new file in its temporary directory once past 64 KiB (a publish passes it), then
 * delete: a file created, written and removed for every publish. The service keeps that journal
 * in memory (PRAGMA temp_store = MEMORY).
 *
 * The service runs as its own process (dist/src/main.js), so that SQLite reads SQLITE_TMPDIR
 * (a scratch directory this test watches) when it starts.
 */
import { mkdirSync, watch } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_TOKEN, ServiceProcess } from '../fault/service.js';
import { scratchDir, TEST_DATABASE } from '../support/app.js';

const onSqlite = TEST_DATABASE === 'sqlite' ? test : test.skip;

onSqlite('publishing 20 plans creates no file in SQLite’s temporary directory', async () => {
  const dir = scratchDir();
  const tmp = join(dir.path, 'sqlite-tmp');
  mkdirSync(tmp);
  const service = new ServiceProcess(join(dir.path, 'planfence.db'), { SQLITE_TMPDIR: tmp });
  // A file created and removed at once is still seen: the watcher reports both.
  const created: string[] = [];
  const watcher = watch(tmp, (_, name) => created.push(String(name)));
  try {
    await service.start();
    const agent = await service.issueToken('temp-files-agent', 'AGENT');
    await service.ok(
      ADMIN_TOKEN,
      'mutation { createEnvironment(input: { name: "temp", requireApproval: false }) { name } }',
    );
    const { acquireLease } = await service.ok<{ acquireLease: { generation: number } }>(
      agent,
      'mutation { acquireLease(input: { environment: "temp", ttlSeconds: 3600 }) { generation } }',
    );
    const statuses: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { submitPlan } = await service.ok<{ submitPlan: { status: string } }>(
        agent,
        'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { status } }',
        {
          input: {
            environment: 'temp',
            generation: acquireLease.generation,
            content: `replicas: ${i}`,
            idempotencyKey: `temp-files-${i}`,
          },
        },
      );
      statuses.push(submitPlan.status);
    }
    expect(statuses).toEqual(Array(20).fill('PUBLISHED'));
    // The watcher's events arrive on a later turn than the writes that caused them.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(created).toEqual([]);
  } finally {
    watcher.close();
    await service.stop();
    dir.cleanup();
  }
});
