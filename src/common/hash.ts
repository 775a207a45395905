import { createHash, type Hash } from 'node:crypto';

export function sha256(text: string): string {
  const hash = createHash('sha256');
  updateInSlices(hash, text);
  return hash.digest('hex');
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
  } else if (typeof value === 'string' && value.length > SLICE) {
    // JSON.stringify escapes a string code point by code point, so its text is the quoted
    // concatenation of each slice's escaped text (no slice splits a surrogate pair): a 1 MiB
    // content is escaped 64 KiB at a time instead of into one more plan-sized string.
    out.add('"');
    forEachSlice(value, (slice) => out.add(JSON.stringify(slice).slice(1, -1)));
    out.add('"');
  } else {
    // String(): what a template literal makes of JSON.stringify's undefined (a function).
    out.add(String(JSON.stringify(value)));
  }
}

/** `text` a slice of about SLICE code units at a time; a slice never ends inside a surrogate pair. */
function forEachSlice(text: string, each: (slice: string) => void): void {
  for (let from = 0; from < text.length;) {
    let to = Math.min(from + SLICE, text.length);
    // Not between the two halves of a pair (a lone half is escaped or replaced alike in any slice).
    if (to < text.length && isHigh(text.charCodeAt(to - 1)) && isLow(text.charCodeAt(to))) to--;
    each(text.slice(from, to));
    from = to;
  }
}

const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/** UTF-8 of `text`, a slice at a time. */
function updateInSlices(hash: Hash, text: string): void {
  forEachSlice(text, (slice) => hash.update(slice, 'utf8'));
}
