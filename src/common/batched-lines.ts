import type { Writable } from 'node:stream';

/** A batch is written once it holds this many characters of lines... */
const BATCH_CHARS = 4096;
/** ...or this long after its first line. */
const BATCH_MS = 100;
/** Lines that wait for stdout's reader beyond this many bytes are dropped, and counted. */
export const UNREAD_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * Log lines to a stream (stdout) in batches: a batch is written at 4 KiB of lines or 100 ms
 * after its first line, whichever comes first, and by `flush` (at exit; before a fatal
 * line's exit). A batch is written by the stream's own `write`, so it never waits and never
 * retries:
 * - a reader that is slow or stopped: the stream holds what it could not write yet and
 *   the service goes on; past `limit` bytes held, lines are dropped and counted, and once
 *   the reader has caught up a warning line says how many;
 * - a reader that is gone (EPIPE) or a full disk: the stream's error, as for any write of it.
 */
export class BatchedLines {
  private batch = '';
  private timer: NodeJS.Timeout | null = null;
  private dropped = 0;

  constructor(
    private readonly out: Writable,
    private readonly limit = UNREAD_LIMIT_BYTES,
  ) {}

  write(line: string): void {
    if (this.out.writableLength > this.limit) {
      this.dropped++;
      return;
    }
    this.batch += line;
    if (this.batch.length >= BATCH_CHARS) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), BATCH_MS).unref();
  }

  /** What pino calls before it exits on a fatal line. */
  flushSync(): void {
    this.flush();
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.dropped && this.out.writableLength <= this.limit / 2) {
      this.batch = droppedLine(this.dropped, this.limit) + this.batch;
      this.dropped = 0;
    }
    const batch = this.batch;
    this.batch = '';
    // A stream that failed (its reader gone) takes nothing more.
    if (batch && !this.out.destroyed) this.out.write(batch);
  }
}

/** The warning, as a line of the service's JSON log, that `count` lines were dropped. */
function droppedLine(count: number, limit: number): string {
  return `${JSON.stringify({
    level: 40,
    time: new Date().toISOString(),
    service: 'planfence',
    context: 'Logging',
    msg: `${count} log lines were dropped: stdout's reader had not taken ${limit / 1048576} MiB of lines`,
  })}\n`;
}

/** The service's log lines to stdout: one batch for the process, written at its exit too. */
let toStdout: BatchedLines | null = null;

export function stdoutLines(): BatchedLines {
  if (!toStdout) {
    const lines = new BatchedLines(process.stdout);
    process.once('exit', () => lines.flush());
    toStdout = lines;
  }
  return toStdout;
}

/** Writes the log lines still in a batch: before a message that must come after them. */
export function flushLogLines(): void {
  toStdout?.flush();
}
