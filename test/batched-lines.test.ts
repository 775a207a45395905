/**
 * The service's JSON lines go to stdout in batches (src/common/batched-lines.ts). A reader
 * that stops reading must not hold up the service, nor make it keep lines without end:
 * past the limit, lines are dropped and counted, and a warning line says how many once the
 * reader has caught up.
 */
import { Writable } from 'node:stream';
import { BatchedLines } from '../src/common/batched-lines.js';

/** A stream whose reader takes nothing until `read()`, as a stdout nobody reads. */
function stalledReader() {
  const taken: string[] = [];
  let waiting: (() => void)[] = [];
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      taken.push(chunk.toString());
      waiting.push(done);
    },
  });
  return {
    out,
    taken,
    /** The reader catches up: everything written so far is taken. */
    async read() {
      while (waiting.length) {
        const now = waiting;
        waiting = [];
        for (const done of now) done();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

const line = (i: number) =>
  `${JSON.stringify({ level: 30, msg: 'request', i, pad: 'x'.repeat(60) })}\n`;

test('lines are written in batches of 4 KiB or more, the rest by flush, each once and in order', async () => {
  const reader = stalledReader();
  const lines = new BatchedLines(reader.out);
  for (let i = 0; i < 100; i++) lines.write(line(i));
  // About 9,000 characters of lines: two batches written, the rest waiting for its flush.
  await reader.read();
  expect(reader.taken).toHaveLength(2);
  for (const batch of reader.taken) expect(batch.length).toBeGreaterThanOrEqual(4096);
  lines.flush();
  await reader.read();
  expect(reader.taken).toHaveLength(3);
  expect(reader.taken.join('')).toBe(Array.from({ length: 100 }, (_, i) => line(i)).join(''));
});

test('past the limit, lines are dropped and counted; once the reader has caught up, a warning says how many', async () => {
  const reader = stalledReader();
  const limit = 64 * 1024;
  const lines = new BatchedLines(reader.out, limit);
  const sent = 2_000;
  for (let i = 0; i < sent; i++) lines.write(line(i));
  lines.flush();
  // What the stream holds stays near the limit (one batch past it at most).
  expect(reader.out.writableLength).toBeLessThanOrEqual(limit + 8192);
  await reader.read();
  // The reader caught up: the next batch begins with the warning.
  lines.write(line(sent));
  lines.flush();
  await reader.read();
  const written = reader.taken
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((text) => JSON.parse(text) as { i?: number; level: number; msg: string });
  const kept = written.filter((entry) => entry.msg === 'request');
  const warnings = written.filter((entry) => entry.level === 40);
  expect(warnings).toHaveLength(1);
  const dropped = Number(/^(\d+) log lines were dropped/.exec(warnings[0].msg)?.[1]);
  expect(kept.length + dropped).toBe(sent + 1);
  expect(dropped).toBeGreaterThan(0);
  // The lines kept are in the order they were written, the last one among them.
  const order = kept.map((entry) => entry.i!);
  expect(order).toEqual([...order].sort((a, b) => a - b));
  expect(order.at(-1)).toBe(sent);
});

test('a stream that failed (its reader gone) is given nothing more', () => {
  const reader = stalledReader();
  const lines = new BatchedLines(reader.out);
  reader.out.destroy();
  for (let i = 0; i < 1_000; i++) lines.write(line(i));
  lines.flush();
  expect(reader.taken).toEqual([]);
});
