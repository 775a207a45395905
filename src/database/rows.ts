import type { EntityManager, EntityMetadata, ObjectLiteral } from 'typeorm';
import { execute, executeLater, select, updateReturning } from './database.js';
import type { Transaction } from './transaction.js';

type Target<E> = new () => E;

/** Statement texts per entity and column list, built once from the entity's metadata. */
const statements = new WeakMap<EntityMetadata, Map<string, string>>();

function statement(metadata: EntityMetadata, key: string, build: () => string): string {
  let byKey = statements.get(metadata);
  if (!byKey) statements.set(metadata, (byKey = new Map<string, string>()));
  let sql = byKey.get(key);
  if (!sql) byKey.set(key, (sql = build()));
  return sql;
}

const quote = (identifier: string) => `"${identifier}"`;

function columnOf(metadata: EntityMetadata, property: string) {
  const column = metadata.findColumnWithPropertyName(property);
  if (!column) throw new Error(`${metadata.name} has no column ${property}`);
  return column;
}

/** The column values of `values` as they are stored (transformers, booleans on SQLite). */
function persistent(m: EntityManager, metadata: EntityMetadata, values: ObjectLiteral) {
  const properties = Object.keys(values).filter((property) => values[property] !== undefined);
  const parameters: Record<string, unknown> = {};
  properties.forEach((property, i) => {
    parameters[`p${i}`] = m.connection.driver.preparePersistentValue(
      values[property],
      columnOf(metadata, property),
    );
  });
  return { properties, parameters };
}

/**
 * The one row of `entity` whose columns equal `where`, or null: what `findOneBy` does,
 * as one cached statement. TypeORM's query builder costs more than the statement itself
 * on SQLite, and these reads are on the path of every decision.
 */
export async function findOne<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  where: Partial<E>,
): Promise<E | null> {
  const metadata = m.connection.getMetadata(entity);
  const { properties, parameters } = persistent(m, metadata, where);
  const sql = statement(metadata, `select:${properties.join(',')}`, () => {
    const conditions = properties.map(
      (property, i) => `${quote(columnOf(metadata, property).databaseName)} = :p${i}`,
    );
    return `SELECT * FROM ${quote(metadata.tableName)} WHERE ${conditions.join(' AND ')} LIMIT 1`;
  });
  const [row] = await select<Record<string, unknown>>(m, sql, parameters);
  return row ? hydrate(m, metadata, row) : null;
}

/** The entity a stored row of its table reads as (what TypeORM's own reads would make of it). */
function hydrate<E>(m: EntityManager, metadata: EntityMetadata, row: Record<string, unknown>): E {
  const entity = metadata.create() as E;
  for (const column of metadata.columns) {
    (entity as ObjectLiteral)[column.propertyName] = m.connection.driver.prepareHydratedValue(
      row[column.databaseName],
      column,
    ) as unknown;
  }
  return entity;
}

export async function findOneOrFail<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  where: Partial<E>,
): Promise<E> {
  const found = await findOne(m, entity, where);
  if (!found) throw new Error(`${entity.name} ${JSON.stringify(where)} does not exist`);
  return found;
}

/** The INSERT of one row of the `properties` (named :p0, :p1, … as `persistent` names them). */
function insertText(metadata: EntityMetadata, properties: string[]): string {
  const columns = properties.map((property) => quote(columnOf(metadata, property).databaseName));
  const placeholders = properties.map((_, i) => `:p${i}`);
  return `INSERT INTO ${quote(metadata.tableName)} (${columns.join(', ')}) VALUES (${placeholders.join(', ')})`;
}

/** The generated primary key column of an entity, if it has one. */
const generatedColumn = (metadata: EntityMetadata) =>
  metadata.columns.find((column) => column.isGenerated);

/**
 * The INSERT of one row of `entity` (the properties of `values` that are not undefined),
 * with `returning(metadata)` after it, as one statement cached per text.
 */
function insertStatement<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  values: Partial<E>,
  returning: (metadata: EntityMetadata) => string = () => '',
) {
  const metadata = m.connection.getMetadata(entity);
  const { properties, parameters } = persistent(m, metadata, values);
  const tail = returning(metadata);
  const sql = statement(
    metadata,
    `insert${tail}:${properties.join(',')}`,
    () => insertText(metadata, properties) + tail,
  );
  return { metadata, sql, parameters };
}

/**
 * PostgreSQL: draws the next generated id of `entity` now, in a statement sent with those
 * the caller sends next (no round trip of its own), for a row the transaction inserts later
 * (takeDrawnId): that insert then waits for no answer, and travels with the commit. Ids
 * order rows: draw only where the transaction already holds what orders them, and where it
 * inserts no other row of the table before that one. Elsewhere nothing is drawn: SQLite
 * answers an insert at once.
 */
export function drawId<E extends ObjectLiteral>(m: Transaction, entity: Target<E>): void {
  if (m.connection.options.type !== 'postgres') return;
  const metadata = m.connection.getMetadata(entity);
  const generated = generatedColumn(metadata);
  if (!generated) throw new Error(`${metadata.name} has no generated id to draw`);
  const sql = statement(
    metadata,
    'draw',
    () =>
      `SELECT nextval(pg_get_serial_sequence('${metadata.tableName}', '${generated.databaseName}')) AS id`,
  );
  const drawn = select<{ id: number | string }>(m, sql).then(([row]) => Number(row.id));
  // Awaited by whoever takes it; a transaction that fails before then rolls back anyway.
  drawn.catch(() => undefined);
  m.drawnIds.set(entity, drawn);
}

/** The id drawn for `entity` in the transaction of `m` (drawId), once; undefined if none was. */
export function takeDrawnId<E extends ObjectLiteral>(
  m: Transaction,
  entity: Target<E>,
): Promise<number> | undefined {
  const drawn = m.drawnIds.get(entity);
  m.drawnIds.delete(entity);
  return drawn;
}

/**
 * Inserts one row of `entity` (the properties of `values` that are not undefined) as one
 * cached statement; returns the generated primary key, if the entity has one.
 */
export async function insertRow<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  values: Partial<E>,
): Promise<number | null> {
  const { metadata, sql, parameters } = insertStatement(m, entity, values, (metadata) => {
    const generated = generatedColumn(metadata);
    return generated ? ` RETURNING ${quote(generated.databaseName)} AS generated` : '';
  });
  if (!generatedColumn(metadata)) {
    await execute(m, sql, parameters);
    return null;
  }
  const [row] = await select<{ generated: number | string }>(m, sql, parameters);
  return Number(row.generated);
}

/**
 * Inserts one row of `entity` whose key the caller gave, without waiting for the answer
 * where the transaction pipelines (executeLater).
 */
export async function insertRowLater<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  values: Partial<E>,
): Promise<void> {
  const { sql, parameters } = insertStatement(m, entity, values);
  await executeLater(m, sql, parameters);
}

/**
 * Inserts one row of `entity` as insertRow does and returns it as stored (defaults and
 * generated columns included): the insert and the read after it in one statement. The
 * properties in `asGiven` (plain text columns, such as a plan's content) are not read back:
 * the returned entity holds the values given, which are what was stored, without the
 * database making a copy of each to return.
 */
export async function insertReturning<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  values: Partial<E>,
  asGiven: readonly (keyof E & string)[] = [],
): Promise<E> {
  const { metadata, sql, parameters } = insertStatement(m, entity, values, (metadata) => {
    if (!asGiven.length) return ' RETURNING *';
    const returned = metadata.columns.filter(
      (column) => !asGiven.includes(column.propertyName as keyof E & string),
    );
    return ` RETURNING ${returned.map((column) => quote(column.databaseName)).join(', ')}`;
  });
  const [row] = await updateReturning<Record<string, unknown>>(m, sql, parameters);
  const stored = hydrate<E>(m, metadata, row);
  for (const property of asGiven) (stored as ObjectLiteral)[property] = values[property] ?? null;
  return stored;
}

/** The rows an `UPDATE … RETURNING *` of `entity`'s table changed, as entities. */
export async function updateEntities<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  sql: string,
  parameters: Record<string, unknown>,
): Promise<E[]> {
  const metadata = m.connection.getMetadata(entity);
  const rows = await updateReturning<Record<string, unknown>>(m, sql, parameters);
  return rows.map((row) => hydrate<E>(m, metadata, row));
}

export async function exists<E extends ObjectLiteral>(
  m: EntityManager,
  entity: Target<E>,
  where: Partial<E>,
): Promise<boolean> {
  return (await findOne(m, entity, where)) !== null;
}
