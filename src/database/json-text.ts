/**
 * A leaf of a JSON value that the database fills in: `name` is the name of its JSON text
 * among those the filling statement computes (see migrations/1765800000000-submit-at-once.ts).
 */
export class JsonLeaf {
  constructor(readonly name: string) {}
}

/**
 * The text `JSON.stringify(value)` gives, as a template the database fills in
 * (`planfence_fill`): literal text and the names of JsonLeaf leaves, alternating, starting
 * and ending with literal text. Everything but the leaves is written by JSON.stringify
 * itself (object keys in their order, a Date by its toJSON, undefined members left out), so
 * once filled with each leaf's JSON text the bytes are those the service's own encoders
 * write.
 */
export function jsonTemplate(value: unknown): string[] {
  const parts: string[] = [''];
  const literal = (text: string) => {
    parts[parts.length - 1] += text;
  };
  const walk = (v: unknown): void => {
    if (v instanceof JsonLeaf) {
      parts.push(v.name, '');
    } else if (Array.isArray(v) && holdsLeaf(v)) {
      literal('[');
      v.forEach((item, i) => {
        if (i) literal(',');
        if (item === undefined || typeof item === 'function') literal('null');
        else walk(item);
      });
      literal(']');
    } else if (isPlainObject(v) && holdsLeaf(v)) {
      literal('{');
      let first = true;
      for (const [key, item] of Object.entries(v)) {
        if (item === undefined || typeof item === 'function') continue;
        literal(`${first ? '' : ','}${JSON.stringify(key)}:`);
        first = false;
        walk(item);
      }
      literal('}');
    } else {
      literal(JSON.stringify(v) ?? 'null');
    }
  };
  walk(value);
  return parts;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function holdsLeaf(v: unknown): boolean {
  if (v instanceof JsonLeaf) return true;
  if (Array.isArray(v)) return v.some(holdsLeaf);
  return isPlainObject(v) && Object.values(v).some(holdsLeaf);
}
