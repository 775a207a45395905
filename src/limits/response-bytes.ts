/**
 * The bytes a GraphQL result will take once serialized as JSON, counted on the result itself
 * before it is serialized: JSON escaping grows a string up to 6× (a control character is
 * `\u0001`), so a result whose strings hold 95 MiB can need 570 MiB of response text, more
 * than a JavaScript string may hold (`RangeError: Invalid string length`).
 */

/** JSON-escaped UTF-8 bytes of `s`, quotes included. */
export function escapedBytes(s: string): number {
  // Most strings need no escaping: the byte length (native) and two quotes.
  if (!NEEDS_ESCAPE.test(s)) return Buffer.byteLength(s, 'utf8') + 2;
  let bytes = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) bytes += SHORT_ESCAPES.has(c) ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) bytes += 2;
    else if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 6; // a lone surrogate is written \udXXX
    } else if (c >= 0xdc00 && c <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

// eslint-disable-next-line no-control-regex -- the characters JSON escapes
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;
/** \b \t \n \f \r */
const SHORT_ESCAPES = new Set([8, 9, 10, 12, 13]);

/**
 * Whether `value` serialized as JSON takes more than `max` bytes. The walk stops as soon as
 * the count passes `max`, and first tries the cheap bound (6 bytes per UTF-16 unit) that
 * settles almost every result without reading a character.
 */
export function jsonBytesOver(value: unknown, max: number): boolean {
  if (roughBytes(value, max) <= max) return false;
  return exactBytes(value, max) > max;
}

/** An upper bound of the JSON size (6 bytes per character), stopping once over `max`. */
function roughBytes(value: unknown, max: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length && total <= max) {
    const v = stack.pop();
    if (typeof v === 'string') total += v.length * 6 + 2;
    else if (v === null || typeof v !== 'object') total += 24;
    else if (Array.isArray(v)) {
      total += 2 + v.length;
      for (const item of v) stack.push(item);
    } else {
      for (const [key, item] of Object.entries(v)) {
        total += key.length * 6 + 3;
        stack.push(item);
      }
    }
  }
  return total;
}

/** The JSON size, exactly for strings (other scalars at most 24 bytes), stopping once over `max`. */
function exactBytes(value: unknown, max: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length && total <= max) {
    const v = stack.pop();
    if (typeof v === 'string') total += escapedBytes(v);
    else if (v === null || typeof v !== 'object') total += 24;
    else if (Array.isArray(v)) {
      total += 2 + v.length;
      for (const item of v) stack.push(item);
    } else {
      for (const [key, item] of Object.entries(v)) {
        total += escapedBytes(key) + 2;
        stack.push(item);
      }
    }
  }
  return total;
}
