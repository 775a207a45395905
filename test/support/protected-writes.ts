/**
 * Finds writes of protected state in source text: SQL statements (in any string or template
 * literal) that insert into, delete from or update a protected table or column, and the
 * entity helpers (insertRow, updateEntities…) called with a protected entity.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;

/** Tables whose every row is the guard's: any insert, update or delete of them. */
const GUARDED_TABLES = ['leases', 'lease_tickets', 'deployments'];
/** Tables with protected columns: an insert or delete, or an update that sets one of them. */
const GUARDED_COLUMNS: Record<string, string[]> = {
  environments: [
    'fence',
    'current_plan_id',
    'current_generation',
    'current_sequence',
    'last_issued_generation',
    'deployment_sequence',
    'state_lineage',
    'state_serial',
    'lease_holder',
    'lease_principal',
    'lease_generation',
    'lease_acquired_at',
    'lease_expires_at',
  ],
  plans: ['status', 'content', 'content_hash', 'artifact', 'artifact_hash'],
};
/** Entities of those tables, as the entity helpers name them. */
const GUARDED_ENTITIES = ['Plan', 'Lease', 'LeaseTicket', 'Deployment', 'Environment'];
const ENTITY_WRITERS = ['insertRow', 'insertRowLater', 'insertReturning', 'updateEntities'];

const name = (n: string) => `"?${n}"?`;
const tables = [...GUARDED_TABLES, ...Object.keys(GUARDED_COLUMNS)];
const INSERT_OR_DELETE = new RegExp(
  `\\b(?:INSERT\\s+(?:OR\\s+\\w+\\s+)?INTO|DELETE\\s+FROM)\\s+(${tables.map(name).join('|')})(?=[\\s(;]|$)`,
  'gi',
);
const UPDATE = new RegExp(
  `\\bUPDATE\\s+(${tables.map(name).join('|')})\\s+SET\\b([\\s\\S]*?)(?:\\bWHERE\\b|\\bRETURNING\\b|[\`'"]\\s*[,)]|$)`,
  'gi',
);
const ENTITY_WRITE = new RegExp(
  `\\b(${ENTITY_WRITERS.join('|')})\\s*(?:<[^>]*>)?\\(\\s*\\w+\\s*,\\s*(${GUARDED_ENTITIES.join('|')})\\b`,
  'g',
);

/** The protected writes in one file's text, as `file:line: statement`. */
export function protectedWritesIn(file: string, text: string): string[] {
  const found: string[] = [];
  const at = (index: number, what: string) =>
    found.push(
      `${file}:${text.slice(0, index).split('\n').length}: ${what.replace(/\s+/g, ' ').slice(0, 100)}`,
    );
  for (const m of text.matchAll(INSERT_OR_DELETE)) at(m.index, m[0]);
  for (const m of text.matchAll(UPDATE)) {
    const table = m[1].replaceAll('"', '').toLowerCase();
    if (GUARDED_TABLES.includes(table)) {
      at(m.index, m[0]);
      continue;
    }
    const assignments = m[2];
    const columns = GUARDED_COLUMNS[table].filter((column) =>
      new RegExp(`(^|[\\s,])"?${column}"?\\s*=`, 'i').test(assignments),
    );
    if (columns.length) at(m.index, m[0]);
  }
  for (const m of text.matchAll(ENTITY_WRITE)) at(m.index, m[0]);
  return found;
}

/** Every protected write in src/ outside src/fencing/. */
export function protectedWritesOutsideTheGuard(): string[] {
  return [...sources(join(ROOT, 'src'))]
    .filter((file) => !relative(ROOT, file).startsWith('src/fencing/'))
    .flatMap((file) => protectedWritesIn(relative(ROOT, file), readFileSync(file, 'utf8')));
}

function* sources(path: string): Generator<string> {
  const stat = statSync(path);
  if (stat.isFile()) {
    if (path.endsWith('.ts')) yield path;
    return;
  }
  for (const entry of readdirSync(path)) yield* sources(join(path, entry));
}
