import { createHash, type Hash } from 'node:crypto';

export function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Text longer than this is hashed a slice at a time. */
const SLICE = 64 * 1024;

/**
 * The digest of `value`'s canonical JSON text (object keys sorted, undefined as null: equal
 * inputs give equal text), without building that text: the pieces are hashed as they are
 * made, and a long string (a plan's content) a slice at a time, so a 1 MiB input costs one
 * copy of its JSON text instead of four. Idempotency records keep this digest: the text it
 * stands for must not change.
 */
export function canonicalSha256(value: unknown): string {
  const hash = createHash('sha256');
  const out = new Pieces(hash);
  feed(out, value);
  out.flush();
  return hash.digest('hex');
}

/** Small pieces gathered into one update (one call per piece would cost more than the text). */
class Pieces {
  private pending = '';

  constructor(private readonly hash: Hash) {}

  add(text: string): void {
    if (text.length > SLICE) {
      this.flush();
      updateInSlices(this.hash, text);
      return;
    }
    this.pending += text;
    if (this.pending.length > SLICE) this.flush();
  }

  flush(): void {
    if (this.pending) this.hash.update(this.pending, 'utf8');
    this.pending = '';
  }
}

function feed(out: Pieces, value: unknown): void {
  if (value === undefined || value === null) {
    out.add('null');
  } else if (Array.isArray(value)) {
    out.add('[');
    value.forEach((item: unknown, i) => {
      if (i) out.add(',');
      feed(out, item);
    });
    out.add(']');
  } else if (typeof value === 'object') {
    out.add('{');
    Object.keys(value)
      .sort()
      .forEach((key, i) => {
        out.add(i ? `,${JSON.stringify(key)}:` : `${JSON.stringify(key)}:`);
        feed(out, (value as Record<string, unknown>)[key]);
      });
    out.add('}');
  } else {
    // String(): what a template literal makes of JSON.stringify's undefined (a function).
    out.add(String(JSON.stringify(value)));
  }
}

/** UTF-8 of `text`, a slice at a time; a slice never ends inside a surrogate pair. */
function updateInSlices(hash: Hash, text: string): void {
  for (let from = 0; from < text.length;) {
    let to = Math.min(from + SLICE, text.length);
    const last = text.charCodeAt(to - 1);
    if (to < text.length && last >= 0xd800 && last <= 0xdbff) to++;
    hash.update(text.slice(from, to), 'utf8');
    from = to;
  }
}
