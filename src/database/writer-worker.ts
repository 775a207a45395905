/**
 * The body of the SQLite writer thread (src/database/sqlite-writer.ts). It is started from
 * its source text (`new Worker(..., { eval: true })`), so this function must stay
 * self-contained: it reaches better-sqlite3 through the path the writer resolved
 * (workerData), and the programs it runs arrive as source text too.
 *
 * It opens a connection of its own to the service's database file, with the service
 * connection's settings, and commits groups of writes: one transaction per group and one
 * COMMIT (one fsync at synchronous=FULL) for all of its writes, as the service's own group
 * commit does (src/database/group-commit.ts). A write that throws is undone alone: the group
 * then runs again with a savepoint per write (commitGroup). Each write is a call
 * of a program defined before (a function of the connection's statements, their texts, and
 * the write's input), which returns the write's value.
 *
 * Messages in:  { define: { name, source, sql } } (a program: its source text and the
 *               statements it names), { group, writes: [{ program, input }] }, 'stop'.
 * Messages out: { ready: true } once; for each group, { group, outcomes } after its COMMIT
 *               (each { value } or { error: { message, code } }), or { group, failed } if
 *               the transaction as a whole failed: then nothing of it committed.
 */
export function writerWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const { driver, path, pragmas } = threads.workerData as {
    driver: string;
    path: string;
    pragmas: string[];
  };
  const Sqlite = require(driver) as typeof import('better-sqlite3');
  /* eslint-enable @typescript-eslint/no-require-imports */
  type Statement = import('better-sqlite3').Statement;
  /** A program: its statements by the texts in `sql`, prepared once each (`statement`). */
  type Program = (
    statement: (sql: string) => Statement,
    sql: Record<string, string>,
    input: unknown,
  ) => unknown;
  const port = threads.parentPort!;
  const db = new Sqlite(path, { fileMustExist: true });
  for (const pragma of pragmas) db.pragma(pragma);
  const programs = new Map<string, { run: Program; sql: Record<string, string> }>();
  const prepared = new Map<string, Statement>();
  const fixed = (sql: string) => {
    let statement = prepared.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      prepared.set(sql, statement);
    }
    return statement;
  };
  const failure = (error: unknown) => ({
    message: String((error as Error | null)?.message ?? error),
    code: (error as { code?: unknown } | null)?.code ?? null,
  });

  type Outcome = { value: unknown } | { error: ReturnType<typeof failure> };
  const run = ({ program, input }: { program: string; input: unknown }) => {
    const defined = programs.get(program);
    if (!defined) throw new Error(`no program named ${program}`);
    return defined.run(fixed, defined.sql, input);
  };
  const rollback = () => {
    if (!db.inTransaction) return;
    try {
      fixed('ROLLBACK').run();
    } catch {
      // SQLite ended it: nothing of the group committed either way.
    }
  };

  /**
   * The group in one transaction, each write in a savepoint of its own, so that a write that
   * throws is undone alone and the others commit.
   */
  const commitInSavepoints = (writes: { program: string; input: unknown }[]) => {
    const outcomes: Outcome[] = [];
    fixed('BEGIN IMMEDIATE').run();
    try {
      for (const write of writes) {
        fixed('SAVEPOINT write').run();
        try {
          const value = run(write);
          fixed('RELEASE write').run();
          outcomes.push({ value });
        } catch (error) {
          try {
            fixed('ROLLBACK TO write').run();
            fixed('RELEASE write').run();
          } catch {
            // SQLite ended the whole transaction (as it may on a full disk or an I/O error):
            // the group fails, with the write's own error (its code), not the savepoint's.
            throw error;
          }
          outcomes.push({ error: failure(error) });
        }
      }
      fixed('COMMIT').run();
    } catch (error) {
      rollback();
      throw error;
    }
    return outcomes;
  };

  /**
   * The group in one transaction, without a savepoint per write: a savepoint has SQLite keep
   * the first image of every page its write changes, to undo it, and most groups have no
   * write that throws. If one does, the whole transaction is rolled back and the group runs
   * again in savepoints (commitInSavepoints), where it alone is undone. A failed COMMIT fails
   * the group as a whole, as there.
   */
  const commitGroup = (writes: { program: string; input: unknown }[]) => {
    const outcomes: Outcome[] = [];
    fixed('BEGIN IMMEDIATE').run();
    try {
      for (const write of writes) outcomes.push({ value: run(write) });
    } catch {
      rollback();
      return commitInSavepoints(writes);
    }
    try {
      fixed('COMMIT').run();
    } catch (error) {
      rollback();
      throw error;
    }
    return outcomes;
  };

  port.on('message', (message: unknown) => {
    if (message === 'stop') {
      db.close();
      port.close();
      return;
    }
    const m = message as
      | { define: { name: string; source: string; sql: Record<string, string> } }
      | { group: number; writes: { program: string; input: unknown }[] };
    if ('define' in m) {
      const { name, source, sql } = m.define;
      let run: Program;
      try {
        // The service's own program, sent as its source text.
        // eslint-disable-next-line @typescript-eslint/no-implied-eval
        const compile = new Function(`return (${source})`) as () => Program;
        run = compile();
      } catch (error) {
        // Each write of it fails with this error; the thread goes on.
        run = () => {
          throw error;
        };
      }
      programs.set(name, { run, sql });
      return;
    }
    try {
      port.postMessage({ group: m.group, outcomes: commitGroup(m.writes) });
    } catch (error) {
      port.postMessage({ group: m.group, failed: failure(error) });
    }
  });
  port.postMessage({ ready: true });
}
