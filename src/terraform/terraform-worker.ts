import { ownThread } from '../common/worker-source.js';

/**
 * The body of a Terraform document worker thread. It is started from its source text (`new
 * Worker(..., { eval: true })`), so this function must stay self-contained (but for
 * common/worker-source.ts's helpers, which its text carries): it reaches `parseTerraformPlan`
 * through the module URL the pool passes in workerData (the built service), or through a
 * bundle of the TypeScript sources compiled by the pool (the test suite runs the sources).
 *
 * Messages in:  { id, content, whole } (whole false: only the masked content and summary back)
 * Messages out: { ready: true, tid } once (on parentPort), then on the replies port
 *               { id, started: true } when the content has arrived, then
 *               { id, parsed } | { id, error, input } (input: the document's fault, BAD_USER_INPUT).
 */
export function terraformWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const path = require('node:path') as typeof import('node:path');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const workerData = threads.workerData as {
    moduleUrl: string;
    bundle: { entry: string; modules: Record<string, string> } | null;
    replies: import('node:worker_threads').MessagePort;
  };
  type Parser = {
    parseTerraformPlan(content: string): { masked: string; summary: unknown };
  };
  const fromBundle = (bundle: { entry: string; modules: Record<string, string> }): Parser => {
    const cache = new Map<string, { exports: Record<string, unknown> }>();
    const load = (file: string): Record<string, unknown> => {
      const known = cache.get(file);
      if (known) return known.exports;
      const module = { exports: {} as Record<string, unknown> };
      cache.set(file, module);
      const local = (specifier: string) =>
        specifier.startsWith('.')
          ? load(path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'))
          : // eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS worker body
            (require(specifier) as Record<string, unknown>);
      // The pool's own compiled sources.
      // eslint-disable-next-line @typescript-eslint/no-implied-eval
      const body = new Function('exports', 'require', 'module', bundle.modules[file]) as (
        exports: Record<string, unknown>,
        require: (specifier: string) => Record<string, unknown>,
        module: { exports: Record<string, unknown> },
      ) => void;
      body(module.exports, local, module);
      return module.exports;
    };
    return load(bundle.entry) as unknown as Parser;
  };
  const loaded: Promise<Parser> = workerData.bundle
    ? Promise.resolve(fromBundle(workerData.bundle))
    : (import(workerData.moduleUrl) as Promise<Parser>);
  const port = workerData.replies;
  void loaded.then((parser) => {
    threads.parentPort!.on(
      'message',
      (message: { id: number; content: string; whole: boolean }) => {
        port.postMessage({ id: message.id, started: true });
        try {
          const parsed = parser.parseTerraformPlan(message.content);
          port.postMessage({
            id: message.id,
            parsed: message.whole ? parsed : { masked: parsed.masked, summary: parsed.summary },
          });
        } catch (error) {
          const { message: text, code } = error as { message?: unknown; code?: unknown };
          port.postMessage({
            id: message.id,
            error: typeof text === 'string' ? text : String(error),
            input: code === 'BAD_USER_INPUT',
          });
        }
      },
    );
    // Its id, where its CPU time can be read (Linux): the budget counts that time. Below the
    // request thread: where cores are few, a document being parsed waits, not /health.
    const tid = ownThread(true);
    threads.parentPort!.postMessage({ ready: true, tid });
  });
}
