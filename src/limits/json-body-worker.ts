import { ownThread } from '../common/worker-source.js';

/**
 * The body of the thread that decodes and parses large JSON request bodies. It is started from
 * its source text (`new Worker(..., { eval: true })`), so this function must stay
 * self-contained (but for common/worker-source.ts's helpers, which its text carries): it
 * reaches secure-json-parse, the parser Fastify's own JSON parser uses, through the path the
 * main thread resolved (workerData), and parses with the server's settings for `__proto__` and
 * `constructor` keys.
 *
 * Like the Terraform document workers, it lowers its own scheduling priority (Linux: nice 10
 * for this thread alone): on a machine with few cores a body being parsed waits for a core,
 * not `/health` and the small requests.
 *
 * Messages in:  { id, bytes } (the body, UTF-8).
 * Messages out: { id, value } (the parsed body) or { id, invalid: true } (not JSON, or a
 *               forbidden key).
 */
export function jsonBodyWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const v8 = require('node:v8') as typeof import('node:v8');
  const vm = require('node:vm') as typeof import('node:vm');
  const { parser, protoAction, constructorAction } = threads.workerData as {
    parser: string;
    protoAction: string;
    constructorAction: string;
  };
  const { parse } = require(parser) as {
    parse: (text: string, options: { protoAction: string; constructorAction: string }) => unknown;
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
  ownThread(true);
  // This thread keeps nothing between bodies: a full collection after each (a millisecond or
  // two of a heap of dead strings) returns their memory at once instead of at V8's next limit.
  let collect = () => undefined as unknown;
  try {
    v8.setFlagsFromString('--expose-gc');
    collect = vm.runInNewContext('gc') as () => unknown;
  } catch {
    // V8 refuses: its own collections will do.
  }
  const port = threads.parentPort!;
  const answer = (id: number, bytes: Uint8Array) => {
    try {
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
      return { id, value: parse(text, { protoAction, constructorAction }) };
    } catch {
      return { id, invalid: true };
    }
  };
  port.on('message', ({ id, bytes }: { id: number; bytes: Uint8Array }) => {
    port.postMessage(answer(id, bytes));
    collect();
  });
}
