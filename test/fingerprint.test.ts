/**
 * The idempotency fingerprint hashed piece by piece is the digest of the whole canonical
 * text: records stored before keep matching the same calls.
 */
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { canonicalSha256, sha256 } from '../src/common/hash.js';

/** The canonical text the stored fingerprints were made from: keys sorted, undefined as null. */
function canonicalJson(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map(
        (key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`,
      );
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Node's Hash over the text's UTF-8, as the stored digests were made. */
const digestOf = (text: string) =>
  createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');
const whole = (value: unknown) => digestOf(canonicalJson(value));

test('a text of any length and content has the digest of its UTF-8', () => {
  const piece = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constantFrom('\ud800', '\udc00', '😀', '\u0000', 'é'),
  );
  fc.assert(
    fc.property(
      fc.array(piece, { maxLength: 8 }),
      fc.constantFrom(0, 65_535, 65_536, 70_000),
      (pieces, pad) => {
        const text = `${'z'.repeat(pad)}${pieces.join('')}`;
        expect(sha256(text)).toBe(digestOf(text));
      },
    ),
    { numRuns: 300 },
  );
});

test('any JSON input hashes as its whole canonical text does', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      expect(canonicalSha256(value)).toBe(whole(value));
    }),
    { numRuns: 500 },
  );
});

test('long contents: a slice never splits a surrogate pair, escapes and undefined members included', () => {
  const emoji = '😀';
  for (const at of [65_535, 65_536, 65_537, 131_071, 131_072]) {
    // The pair straddles the slice boundary at every offset around it.
    const content = `${'a'.repeat(at - 1)}${emoji}"\\\n${'é'.repeat(70_000)}${emoji}`;
    const input = {
      operation: 'submitPlan',
      input: { environment: 'prod', content, title: undefined, tags: [undefined, 1, 'x'] },
    };
    expect(canonicalSha256(input)).toBe(whole(input));
  }
  // A lone surrogate is escaped by JSON.stringify, so it hashes alike too.
  const lone = { content: `${'b'.repeat(65_535)}\ud800tail` };
  expect(canonicalSha256(lone)).toBe(whole(lone));
});

test('a long string hashes as its whole JSON text, whatever it holds where the slices meet', () => {
  // Pieces that JSON.stringify escapes (quotes, backslashes, controls, lone surrogates) or
  // keeps as pairs, around the 64 Ki code units where one slice ends.
  const piece = fc.constantFrom(
    'a',
    '"',
    '\\',
    '\n',
    '\u0001',
    'é',
    '😀',
    '\ud800',
    '\udc00',
    '\u2028',
  );
  fc.assert(
    fc.property(fc.nat(40), fc.array(piece, { minLength: 1, maxLength: 60 }), (offset, pieces) => {
      const content = `${'x'.repeat(65_536 - offset)}${pieces.join('')}${'y'.repeat(offset)}`;
      expect(canonicalSha256({ content })).toBe(whole({ content }));
      expect(sha256(content)).toBe(digestOf(content));
    }),
    { numRuns: 500 },
  );
});
