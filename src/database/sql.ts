import { type EntityManager, QueryFailedError } from 'typeorm';
import { type Later, Transaction } from './transaction.js';

/**
 * Statements with named `:parameters`, bound once per text and, on SQLite, prepared once on
 * the driver's connection: the helpers every conditional statement of the service runs through.
 */

/** A statement's text with positional placeholders, and the parameter name of each position. */
interface Bound {
  text: string;
  names: string[];
}

/** A named parameter in a statement's text. */
const PARAMETER = /:([A-Za-z_][A-Za-z0-9_]*)/g;

const boundStatements = { sqlite: new Map<string, Bound>(), postgres: new Map<string, Bound>() };

/**
 * Turns named `:parameters` into the driver's placeholders, once per statement text, and
 * binds every value (numbers too, which TypeORM's own escaping would write into the text
 * and so make a new statement to prepare for every timestamp).
 */
function bind(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): [string, unknown[]] {
  const postgres = manager.connection.options.type === 'postgres';
  const cache = postgres ? boundStatements.postgres : boundStatements.sqlite;
  let bound = cache.get(sql);
  if (!bound) {
    const names: string[] = [];
    const text = sql.replace(PARAMETER, (_, name: string) => {
      if (!postgres) {
        names.push(name);
        return '?';
      }
      // PostgreSQL numbers its placeholders: a name used twice is one parameter.
      const at = names.indexOf(name);
      return `$${at >= 0 ? at + 1 : names.push(name)}`;
    });
    bound = { text, names };
    cache.set(sql, bound);
  }
  const values = bound.names.map((name) => {
    const value = parameters[name];
    if (value === undefined) throw new Error(`statement parameter :${name} has no value`);
    return typeof value === 'boolean' && !postgres ? Number(value) : value;
  });
  return [bound.text, values];
}

type SqliteConnection = import('better-sqlite3').Database;
type SqliteStatement = import('better-sqlite3').Statement;

/** Prepared statements per SQLite connection, by text (a service has one connection; tests have many). */
const prepared = new WeakMap<SqliteConnection, Map<string, SqliteStatement>>();

/**
 * On SQLite, the statement prepared once on the driver's one connection, to run directly:
 * inside the transaction TypeORM began on that connection, without the query runner's
 * asynchronous layers around a synchronous driver. Null on PostgreSQL.
 */
export function sqliteStatement(manager: EntityManager, text: string): SqliteStatement | null {
  if (manager.connection.options.type !== 'better-sqlite3') return null;
  const connection = (
    manager.connection.driver as unknown as { databaseConnection: SqliteConnection }
  ).databaseConnection;
  let statements = prepared.get(connection);
  if (!statements) prepared.set(connection, (statements = new Map<string, SqliteStatement>()));
  let statement = statements.get(text);
  if (!statement) statements.set(text, (statement = connection.prepare(text)));
  return statement;
}

function runSqlite<T>(query: string, values: unknown[], run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw new QueryFailedError(query, values, error as Error);
  }
}

/** Runs a conditional statement (named `:parameters`); the affected-row count is the decision. */
export function execute(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<number> {
  sendLater(manager);
  return run(manager, sql, parameters);
}

async function run(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): Promise<number> {
  if (!manager.queryRunner) throw new Error('execute() needs a transaction manager');
  const [query, values] = bind(manager, sql, parameters);
  const statement = sqliteStatement(manager, query);
  if (statement) return runSqlite(query, values, () => statement.run(...values).changes);
  const result = await manager.queryRunner.query(query, values, true);
  return result.affected ?? 0;
}

/** Starts the list of a PostgreSQL transaction's later statements (Database opens it). */
export function openLater(manager: Transaction, first: Promise<unknown>): void {
  manager.later = { unsent: [], answers: [first] };
}

/** The later statements of the transaction of `manager`, if it holds statements back. */
function laterOf(manager: EntityManager) {
  return manager instanceof Transaction ? manager.later : null;
}

/** Sends the later statements not sent yet, in the order they were made. */
function sendLater(manager: EntityManager): void {
  const list = laterOf(manager);
  if (!list?.unsent.length) return;
  for (const [sql, parameters, reader] of joined(list.unsent.splice(0))) {
    const answer = reader ? rowsOf(manager, sql, parameters) : run(manager, sql, parameters);
    if (reader) answer.then(reader.resolve, reader.reject);
    // Awaited by the transaction before it reports its commit.
    answer.catch(() => undefined);
    list.answers.push(answer);
  }
}

/** What `joined` needs to know of a statement's text: the table of a plain INSERT (no RETURNING), or a SELECT. */
type Kind = { insertInto: string } | 'select' | 'other';

/** Kinds by statement text (statement texts are few and reused). */
const kinds = new Map<string, Kind>();

function kindOf(sql: string): Kind {
  let kind = kinds.get(sql);
  if (!kind) {
    const insert = /^\s*INSERT\s+INTO\s+("?[A-Za-z_][A-Za-z0-9_]*"?)/i.exec(sql);
    if (insert && !/\bRETURNING\b/i.test(sql)) kind = { insertInto: insert[1].replace(/"/g, '') };
    else kind = /^\s*SELECT\b/i.test(sql) ? 'select' : 'other';
    kinds.set(sql, kind);
  }
  return kind;
}

/**
 * Later statements joined where they can be: consecutive INSERTs into different tables
 * become the data-modifying WITH queries of one statement, whose main query is the SELECT
 * that follows them (the notifications) or `SELECT 1`. One statement for PostgreSQL to
 * parse, plan and answer instead of one per kind of row. The parts of one statement run in
 * no set order and see the same snapshot, so two rows of one table (whose ids keep the
 * order they were made in) and anything but an INSERT stay statements of their own.
 */
function joined(statements: Later[]): Later[] {
  const out: Later[] = [];
  let group: Later[] = [];
  const tables = new Set<string>();
  const close = (main: Later | null) => {
    if (group.length + (main ? 1 : 0) < 2) out.push(...group, ...(main ? [main] : []));
    else out.push(withQueries(group, main));
    group = [];
    tables.clear();
  };
  for (const statement of statements) {
    const kind = kindOf(statement[0]);
    if (statement[2]) {
      // A read someone waits for keeps its own statement: the parts of a joined one would
      // not see the rows the statements before it add.
      close(null);
      out.push(statement);
    } else if (typeof kind === 'object') {
      // A second row of a table starts a statement of its own.
      if (tables.has(kind.insertInto)) close(null);
      group.push(statement);
      tables.add(kind.insertInto);
    } else if (kind === 'select') {
      close(statement);
    } else {
      close(null);
      out.push(statement);
    }
  }
  close(null);
  return out;
}

/** A statement's text as the i-th part of a joined statement, and its parameters' names there. */
interface Part {
  text: string;
  names: [given: string, joined: string][];
}

/** Parts by position, then by text (statement texts are few and reused). */
const parts: Map<string, Part>[] = [];

function partOf(sql: string, i: number): Part {
  const byText = (parts[i] ??= new Map<string, Part>());
  let part = byText.get(sql);
  if (!part) {
    const names = new Map<string, string>();
    const text = sql.replace(PARAMETER, (_, name: string) => {
      const joined = `w${i}_${name}`;
      names.set(name, joined);
      return `:${joined}`;
    });
    byText.set(sql, (part = { text, names: [...names] }));
  }
  return part;
}

/** `WITH w0 AS (insert), w1 AS (insert) <main or SELECT 1>`, each part's parameters renamed apart. */
function withQueries(inserts: Later[], main: Later | null): Later {
  const parameters: Record<string, unknown> = {};
  const part = ([sql, values]: Later, i: number) => {
    const { text, names } = partOf(sql, i);
    for (const [given, joined] of names) parameters[joined] = values[given];
    return text;
  };
  const queries = inserts.map((statement, i) => `w${i} AS (${part(statement, i)})`);
  const last = main ? part(main, inserts.length) : 'SELECT 1';
  return [`WITH ${queries.join(', ')} ${last}`, parameters];
}

/**
 * Ends that list and returns the answers still to come, in order: first sending what was not
 * sent (`send`, the commit) or dropping it (a transaction that failed).
 */
export function takeLater(manager: Transaction, send: boolean): Promise<unknown>[] {
  const list = manager.later;
  if (send) sendLater(manager);
  else
    for (const [, , reader] of list?.unsent ?? [])
      reader?.reject(new Error('the transaction failed before this read was sent'));
  manager.later = null;
  return list?.answers ?? [];
}

/**
 * A statement whose answer decides nothing (a row a decision adds, its notifications). In a
 * PostgreSQL transaction it is held back and sent with the next statement of the
 * transaction that is waited for, or with the COMMIT, in order: one round trip carries them
 * (the pool's connections pipeline). The transaction fails, and rolls back, if it failed.
 * Elsewhere it runs as `execute` does.
 */
export async function executeLater(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<void> {
  const list = laterOf(manager);
  if (list) list.unsent.push([sql, parameters]);
  else await execute(manager, sql, parameters);
}

/** Runs a query (named `:parameters`) and returns its rows. */
export function select<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<R[]> {
  sendLater(manager);
  return rowsOf(manager, sql, parameters);
}

async function rowsOf<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): Promise<R[]> {
  const [query, values] = bind(manager, sql, parameters);
  const statement = sqliteStatement(manager, query);
  if (statement) return runSqlite(query, values, () => statement.all(...values) as R[]);
  return manager.query<R[]>(query, values);
}

/**
 * A query whose rows nothing in the transaction waits for (what a decision's answer shows).
 * In a PostgreSQL transaction it is held back as executeLater's statements are and sent in
 * their order, with the next statement waited for or with the COMMIT; its rows come with that
 * answer. So await it after the transaction (inside it, only once a later statement has been
 * waited for): before that nothing has sent it. If the transaction fails first, it rejects.
 * Elsewhere it runs as `select` does.
 */
export function selectLater<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown> = {},
): Promise<R[]> {
  const list = laterOf(manager);
  if (!list) return select<R>(manager, sql, parameters);
  return new Promise<R[]>((resolve, reject) => {
    list.unsent.push([sql, parameters, { resolve: resolve as (rows: unknown) => void, reject }]);
  });
}

/** Rows of an `UPDATE ... RETURNING`: PostgreSQL's driver answers it with [rows, affected]. */
export async function updateReturning<R>(
  manager: EntityManager,
  sql: string,
  parameters: Record<string, unknown>,
): Promise<R[]> {
  const result = await select<unknown>(manager, sql, parameters);
  return (Array.isArray(result[0]) ? result[0] : result) as R[];
}

/**
 * The members of the JSON array parameter `:name` (integers or strings) as a subquery: one
 * statement text whatever the values (statements are prepared and cached by their text).
 */
export function jsonList(
  dialect: 'sqlite' | 'postgres',
  name: string,
  of: 'integer' | 'text',
): string {
  if (dialect === 'sqlite') return `SELECT value FROM json_each(:${name})`;
  const value = of === 'integer' ? 'CAST(value AS INTEGER)' : 'value';
  return `SELECT ${value} FROM json_array_elements_text(CAST(:${name} AS json))`;
}
