/**
 * The restore margin as the guard applies it (`raiseAfterRestore`, what `npm run restore`
 * runs), in this process and on this project's database. The command itself, its usage
 * errors and the backup it follows are proven in test/operator/storage.test.ts.
 */
import { DataSource, type EntityManager } from 'typeorm';
import { loadConfig } from '../src/config/config.js';
import { dataSourceOptions } from '../src/database/data-source.js';
import { raiseAfterRestore, RestoreMarginTooLarge } from '../src/fencing/restore.js';
import { LAST_GENERATION } from '../src/fencing/sql.js';
import { ADMIN_TOKEN, codeOf, ok, scratchDatabase, startApp, type TestApp } from './support/app.js';

const ENVIRONMENT = `query($n: String!) {
  environment(name: $n) { fence lastIssuedGeneration deploymentSequence lease { holder } }
}`;

/** Opens the database as the restore command does, runs `work` in one transaction, closes it. */
async function inTransaction<T>(url: string, work: (m: EntityManager) => Promise<T>): Promise<T> {
  const dataSource = new DataSource(
    dataSourceOptions(loadConfig({ ...process.env, DATABASE_URL: url })),
  );
  await dataSource.initialize();
  try {
    return await dataSource.transaction(work);
  } finally {
    await dataSource.destroy();
  }
}

/** A service on `url` with environments `a` (three generations issued, a live lease) and `b` (none). */
async function seeded(url: string): Promise<void> {
  const app = await startApp({ DATABASE_URL: url });
  try {
    for (const name of ['a', 'b'])
      ok(
        await app.gql(
          ADMIN_TOKEN,
          `mutation($n: String!) { createEnvironment(input: { name: $n, mode: STRICT }) { name } }`,
          { n: name },
        ),
      );
    for (let i = 0; i < 3; i++)
      ok(
        await app.gql(
          ADMIN_TOKEN,
          `mutation { acquireLease(input: { environment: "a", ttlSeconds: 3600 }) { generation } }`,
        ),
      );
  } finally {
    await app.close();
  }
}

/** Runs `work` on a new database seeded as `seeded` leaves it; drops the database after. */
async function onSeededDatabase(work: (url: string) => Promise<void>): Promise<void> {
  const database = await scratchDatabase(true);
  try {
    await seeded(database.url);
    await work(database.url);
  } finally {
    await database.cleanup();
  }
}

/** Runs `work` against a service started on `url`, and stops it after. */
async function withService(url: string, work: (app: TestApp) => Promise<void>): Promise<void> {
  const app = await startApp({ DATABASE_URL: url });
  try {
    await work(app);
  } finally {
    await app.close();
  }
}

async function environment(app: TestApp, name: string) {
  return ok(
    await app.gql<{
      environment: {
        fence: number;
        lastIssuedGeneration: number;
        deploymentSequence: number;
        lease: { holder: string } | null;
      };
    }>(ADMIN_TOKEN, ENVIRONMENT, { n: name }),
  ).environment;
}

function acquire(app: TestApp, environment: string) {
  return app.gql<{ acquireLease: { generation: number } }>(
    ADMIN_TOKEN,
    `mutation($e: String!) { acquireLease(input: { environment: $e, ttlSeconds: 60 }) { generation } }`,
    { e: environment },
  );
}

async function auditOf(app: TestApp, environment: string) {
  return ok(
    await app.gql<{
      auditEvents: { action: string; actor: string; generation: number; detail: string | null }[];
    }>(
      ADMIN_TOKEN,
      `query($n: String!) { auditEvents(environment: $n, first: 20) { action actor generation detail } }`,
      { n: environment },
    ),
  ).auditEvents;
}

// proves: R1, R3
test('a restore raises every counter, fence and deployment sequence by the margin, ends every lease and audits each environment', () =>
  onSeededDatabase(async (url) => {
    const raised = await inTransaction(url, (m) =>
      raiseAfterRestore(m, { margin: 10, actor: 'operator:test', now: Date.now() }),
    );
    expect(raised).toEqual([
      { name: 'a', lastIssuedGeneration: 13, fence: 13 },
      { name: 'b', lastIssuedGeneration: 10, fence: 10 },
    ]);

    await withService(url, async (app) => {
      expect(await environment(app, 'a')).toEqual({
        fence: 13,
        lastIssuedGeneration: 13,
        deploymentSequence: 10,
        lease: null,
      });
      expect(await environment(app, 'b')).toMatchObject({ fence: 10, deploymentSequence: 10 });
      expect(ok(await acquire(app, 'a')).acquireLease.generation).toBe(14);
      const late = await app.gql(
        ADMIN_TOKEN,
        `mutation { submitPlan(input: { environment: "a", generation: 3, content: "late", idempotencyKey: "late" }) { id } }`,
      );
      expect(codeOf(late)).toBe('STALE_GENERATION');
      for (const [name, generation] of [
        ['a', 13],
        ['b', 10],
      ] as const) {
        const audit = (await auditOf(app, name)).filter((e) => e.action === 'RESTORE_MARGIN');
        expect(audit).toEqual([
          {
            action: 'RESTORE_MARGIN',
            actor: 'operator:test',
            generation,
            detail:
              'restored from a backup: generation counter raised by 10, fence raised to it, leases ended',
          },
        ]);
      }
    });
  }));

// proves: R1
test('a margin that would carry a counter past the largest generation changes nothing; one that reaches it exactly is taken', () =>
  onSeededDatabase(async (url) => {
    const now = Date.now();
    // a has issued 3: a margin of MAX - 2 would make it MAX + 1.
    const refused = inTransaction(url, (m) =>
      raiseAfterRestore(m, { margin: LAST_GENERATION - 2, actor: 'operator:test', now }),
    );
    await expect(refused).rejects.toBeInstanceOf(RestoreMarginTooLarge);
    // What the restore command tells the operator.
    await expect(refused).rejects.toThrow(
      `a margin of ${LAST_GENERATION - 2} would carry a generation past ${LAST_GENERATION}; nothing was changed`,
    );
    await withService(url, async (app) => {
      expect(await environment(app, 'a')).toMatchObject({ fence: 3, lastIssuedGeneration: 3 });
      expect(await environment(app, 'b')).toMatchObject({ fence: 0, lastIssuedGeneration: 0 });
      expect((await auditOf(app, 'b')).map((e) => e.action)).not.toContain('RESTORE_MARGIN');
    });

    const raised = await inTransaction(url, (m) =>
      raiseAfterRestore(m, { margin: LAST_GENERATION - 3, actor: 'operator:test', now }),
    );
    expect(raised.map((e) => e.lastIssuedGeneration)).toEqual([
      LAST_GENERATION,
      LAST_GENERATION - 3,
    ]);
    await withService(url, async (app) => {
      expect(await environment(app, 'a')).toMatchObject({
        fence: LAST_GENERATION,
        lastIssuedGeneration: LAST_GENERATION,
      });
    });
  }));

// proves: R1
test('an environment that has issued its last generation refuses leases and lease tickets with GENERATIONS_EXHAUSTED; the last generation still writes', () =>
  onSeededDatabase(async (url) => {
    // a has issued 3: a margin of MAX - 4 leaves it one generation.
    await inTransaction(url, (m) =>
      raiseAfterRestore(m, {
        margin: LAST_GENERATION - 4,
        actor: 'operator:test',
        now: Date.now(),
      }),
    );
    await withService(url, async (app) => {
      const last = ok(await acquire(app, 'a')).acquireLease.generation;
      expect(last).toBe(LAST_GENERATION);
      ok(
        await app.gql(
          ADMIN_TOKEN,
          `mutation($g: Int!) { submitPlan(input: { environment: "a", generation: $g, content: "the last", idempotencyKey: "last" }) { id } }`,
          { g: last },
        ),
      );
      ok(
        await app.gql(
          ADMIN_TOKEN,
          `mutation($g: Int!) { releaseLease(input: { environment: "a", generation: $g }) }`,
          { g: last },
        ),
      );

      const refused = await acquire(app, 'a');
      expect(codeOf(refused)).toBe('GENERATIONS_EXHAUSTED');
      expect(refused.errors![0].extensions).toEqual({
        code: 'GENERATIONS_EXHAUSTED',
        lastIssuedGeneration: LAST_GENERATION,
      });
      expect(refused.errors![0].message).toContain('has issued its last generation');
      const ticket = await app.gql(
        ADMIN_TOKEN,
        `mutation { enqueueLease(input: { environment: "a", ttlSeconds: 60 }) { id status } }`,
      );
      expect(codeOf(ticket)).toBe('GENERATIONS_EXHAUSTED');
      expect(await environment(app, 'a')).toMatchObject({
        lastIssuedGeneration: LAST_GENERATION,
        lease: null,
      });
      // Another environment is not affected.
      ok(await acquire(app, 'b'));
    });
  }));
