/**
 * The admin's first token and the operator's ways back in: the generated token file is
 * created exclusively (never through a symlink, never over an existing file, mode 0600),
 * the admin row and the file exist together or not at all, the last admin cannot be
 * revoked, and a restart with a new PLANFENCE_ADMIN_TOKEN restores access.
 */
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { distFile } from '../fault/service.js';
import { ADMIN_TOKEN, codeOf, ok, scratchDatabase, scratchDir, startApp } from '../support/app.js';

const WHOAMI = '{ whoami { name role revokedAt } }';

interface Scratch {
  dir: string;
  tokenFile: string;
  databaseUrl: string;
  cleanup(): Promise<void>;
}

const scratches: Scratch[] = [];
afterAll(async () => {
  for (const scratch of scratches) await scratch.cleanup();
});

async function scratch(): Promise<Scratch> {
  const dir = scratchDir();
  const database = await scratchDatabase(true);
  const made = {
    dir: dir.path,
    tokenFile: join(dir.path, 'secrets', 'admin-token'),
    databaseUrl: database.url,
    cleanup: async () => {
      await database.cleanup();
      dir.cleanup();
    },
  };
  scratches.push(made);
  return made;
}

/** Runs the real service (dist/src/main.js) until it exits on its own; its exit code and stderr. */
function startProcess(
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  const inherited = { ...process.env };
  delete inherited.PLANFENCE_ADMIN_TOKEN;
  const child = spawn(process.execPath, [distFile('src/main.js')], {
    env: { ...inherited, PORT: '0', LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    }),
  );
}

/** How many principals the database holds, read directly (not through the service). */
async function principalRows(databaseUrl: string): Promise<number> {
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Sqlite(databaseUrl.slice('sqlite:'.length), { readonly: true });
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM principals').get() as { n: number }).n;
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM principals');
    return Number(rows[0].n);
  } finally {
    await client.end();
  }
}

/** Runs statements on the database directly (not through the service). */
async function runSql(databaseUrl: string, statements: string[]): Promise<void> {
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Sqlite(databaseUrl.slice('sqlite:'.length));
    try {
      for (const statement of statements) db.exec(statement);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

/** The service started in this process without PLANFENCE_ADMIN_TOKEN, so that it generates one. */
function startGenerating(s: Scratch) {
  return startApp(
    {
      DATABASE_URL: s.databaseUrl,
      PLANFENCE_ADMIN_TOKEN: '',
      PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile,
    },
    null,
  );
}

describe('the generated admin-token file', () => {
  test('a pre-existing file at the token path: the start refuses, the file is untouched, no admin row', async () => {
    const s = await scratch();
    mkdirSync(join(s.dir, 'secrets'));
    writeFileSync(s.tokenFile, 'planted by someone else\n');
    chmodSync(s.tokenFile, 0o666);

    const run = await startProcess({
      DATABASE_URL: s.databaseUrl,
      PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot create the admin token file ${s.tokenFile}`);
    // What to do, without moving a file another database may need.
    expect(run.stderr).toContain('PLANFENCE_ADMIN_TOKEN_FILE=PATH');
    expect(readFileSync(s.tokenFile, 'utf8')).toBe('planted by someone else\n');
    expect(statSync(s.tokenFile).mode & 0o777).toBe(0o666);
    expect(await principalRows(s.databaseUrl)).toBe(0);
  });

  test('a symlink at the token path: the start refuses and the target is untouched', async () => {
    const s = await scratch();
    mkdirSync(join(s.dir, 'secrets'));
    const target = join(s.dir, 'target');
    writeFileSync(target, 'the attacker reads this file\n');
    chmodSync(target, 0o644);
    symlinkSync(target, s.tokenFile);

    const run = await startProcess({
      DATABASE_URL: s.databaseUrl,
      PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(s.tokenFile);
    expect(readFileSync(target, 'utf8')).toBe('the attacker reads this file\n');
    expect(statSync(target).mode & 0o777).toBe(0o644);
    expect(lstatSync(s.tokenFile).isSymbolicLink()).toBe(true);
    expect(await principalRows(s.databaseUrl)).toBe(0);
  });

  test('a dangling symlink at the token path: the start refuses and creates nothing at its target', async () => {
    const s = await scratch();
    mkdirSync(join(s.dir, 'secrets'));
    const target = join(s.dir, 'would-be-created');
    symlinkSync(target, s.tokenFile);

    const run = await startProcess({
      DATABASE_URL: s.databaseUrl,
      PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile,
    });
    expect(run.code).toBe(1);
    expect(existsSync(target)).toBe(false);
    expect(await principalRows(s.databaseUrl)).toBe(0);
  });

  test('after a refused start, removing the file lets the next start create the admin', async () => {
    const s = await scratch();
    mkdirSync(join(s.dir, 'secrets'));
    writeFileSync(s.tokenFile, 'stale\n');
    expect(
      (await startProcess({ DATABASE_URL: s.databaseUrl, PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile }))
        .code,
    ).toBe(1);
    rmSync(s.tokenFile);

    const app = await startGenerating(s);
    try {
      const token = readFileSync(s.tokenFile, 'utf8').trim();
      expect(ok(await app.gql(token, WHOAMI))).toEqual({
        whoami: { name: 'admin', role: 'ADMIN', revokedAt: null },
      });
    } finally {
      await app.close();
    }
  });

  test('when the admin row cannot be committed, the token file is removed again and the start stops', async () => {
    const s = await scratch();
    // A database with every migration applied and no principal, whose inserts of principals fail.
    const migrated = await startApp(
      { DATABASE_URL: s.databaseUrl, PLANFENCE_ADMIN_TOKEN: 'pf_only_to_migrate_000000' },
      null,
    );
    await migrated.close();
    await runSql(
      s.databaseUrl,
      s.databaseUrl.startsWith('sqlite:')
        ? [
            'DELETE FROM principals',
            "CREATE TRIGGER refuse BEFORE INSERT ON principals BEGIN SELECT RAISE(ABORT, 'no principals today'); END",
          ]
        : [
            'DELETE FROM principals',
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no principals today'; END $$ LANGUAGE plpgsql",
            'CREATE TRIGGER refuse BEFORE INSERT ON principals FOR EACH ROW EXECUTE FUNCTION refuse()',
          ],
    );

    const run = await startProcess({
      DATABASE_URL: s.databaseUrl,
      PLANFENCE_ADMIN_TOKEN_FILE: s.tokenFile,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `could not store the admin principal, so the token file ${s.tokenFile} was removed again`,
    );
    expect(existsSync(s.tokenFile)).toBe(false);
    expect(await principalRows(s.databaseUrl)).toBe(0);
  });

  test('a normal first start writes the token to a new 0600 file, and the token works; a restart keeps both', async () => {
    const s = await scratch();
    const first = await startGenerating(s);
    let token: string;
    try {
      expect(statSync(s.tokenFile).mode & 0o777).toBe(0o600);
      token = readFileSync(s.tokenFile, 'utf8').trim();
      expect(token).toMatch(/^pf_[A-Za-z0-9_-]{43}$/);
      expect(ok(await first.gql(token, WHOAMI))).toEqual({
        whoami: { name: 'admin', role: 'ADMIN', revokedAt: null },
      });
    } finally {
      await first.close();
    }
    expect(await principalRows(s.databaseUrl)).toBe(1);

    const second = await startGenerating(s);
    try {
      expect(readFileSync(s.tokenFile, 'utf8').trim()).toBe(token);
      expect(codeOf(await second.gql(token, WHOAMI))).toBe('OK');
    } finally {
      await second.close();
    }
  });
});

describe('the last admin', () => {
  test('revoking the last admin is refused, and its token keeps working', async () => {
    const app = await startApp();
    try {
      const refused = await app.gql(
        ADMIN_TOKEN,
        'mutation { revokeToken(name: "admin") { name } }',
      );
      expect(codeOf(refused)).toBe('FORBIDDEN');
      expect(refused.errors?.[0].message).toMatch(/last admin/);
      expect(codeOf(await app.gql(ADMIN_TOKEN, WHOAMI))).toBe('OK');
    } finally {
      await app.close();
    }
  });

  test('with two admins, revoking one works; the other is then the last and cannot be revoked', async () => {
    const app = await startApp();
    try {
      const second = ok(
        await app.gql<{ issueToken: { token: string } }>(
          ADMIN_TOKEN,
          'mutation { issueToken(name: "second-admin", role: ADMIN) { token } }',
        ),
      ).issueToken.token;
      const revoked = await app.gql(
        second,
        'mutation { revokeToken(name: "admin") { name revokedAt } }',
      );
      expect(codeOf(revoked)).toBe('OK');
      expect(codeOf(await app.gql(ADMIN_TOKEN, WHOAMI))).toBe('UNAUTHENTICATED');

      const last = await app.gql(second, 'mutation { revokeToken(name: "second-admin") { name } }');
      expect(codeOf(last)).toBe('FORBIDDEN');
      expect(codeOf(await app.gql(second, WHOAMI))).toBe('OK');
      // Revoking an already revoked admin changes nothing and is not an error.
      expect(
        codeOf(await app.gql(second, 'mutation { revokeToken(name: "admin") { name } }')),
      ).toBe('OK');
    } finally {
      await app.close();
    }
  });

  test('two admins revoking each other at once: exactly one revocation succeeds', async () => {
    const app = await startApp();
    try {
      const second = ok(
        await app.gql<{ issueToken: { token: string } }>(
          ADMIN_TOKEN,
          'mutation { issueToken(name: "rival-admin", role: ADMIN) { token } }',
        ),
      ).issueToken.token;
      const results = await Promise.all([
        app.gql(ADMIN_TOKEN, 'mutation { revokeToken(name: "rival-admin") { name } }'),
        app.gql(second, 'mutation { revokeToken(name: "admin") { name } }'),
      ]);
      const codes = results.map(codeOf).sort();
      // The loser is refused as the last admin, or (when the winner committed first) as revoked.
      expect(codes.filter((c) => c === 'OK')).toHaveLength(1);
      const alive = await Promise.all([app.gql(ADMIN_TOKEN, WHOAMI), app.gql(second, WHOAMI)]);
      expect(alive.map(codeOf).filter((c) => c === 'OK')).toHaveLength(1);
    } finally {
      await app.close();
    }
  });

  test('restarting with a new PLANFENCE_ADMIN_TOKEN after the admin was revoked restores access', async () => {
    const s = await scratch();
    const oldToken = 'pf_old_admin_token_000000000000';
    const newToken = 'pf_new_admin_token_111111111111';
    const before = await startApp(
      { DATABASE_URL: s.databaseUrl, PLANFENCE_ADMIN_TOKEN: oldToken },
      null,
    );
    try {
      const deputy = ok(
        await before.gql<{ issueToken: { token: string } }>(
          oldToken,
          'mutation { issueToken(name: "deputy", role: ADMIN) { token } }',
        ),
      ).issueToken.token;
      ok(await before.gql(deputy, 'mutation { revokeToken(name: "admin") { name } }'));
      expect(codeOf(await before.gql(oldToken, WHOAMI))).toBe('UNAUTHENTICATED');
    } finally {
      await before.close();
    }

    const after = await startApp(
      { DATABASE_URL: s.databaseUrl, PLANFENCE_ADMIN_TOKEN: newToken },
      null,
    );
    try {
      expect(ok(await after.gql(newToken, WHOAMI))).toEqual({
        whoami: { name: 'admin', role: 'ADMIN', revokedAt: null },
      });
      expect(codeOf(await after.gql(oldToken, WHOAMI))).toBe('UNAUTHENTICATED');
      // The restored admin can act as one.
      expect(
        codeOf(
          await after.gql(
            newToken,
            'mutation { issueToken(name: "after-recovery", role: VIEWER) { token } }',
          ),
        ),
      ).toBe('OK');
    } finally {
      await after.close();
    }
  });
});
