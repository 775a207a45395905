import { ownThread } from '../common/worker-source.js';

/**
 * The body of a policy worker thread. It is started from its source text (`new Worker(..., {
 * eval: true })`), so this function must stay self-contained (but for
 * common/worker-source.ts's helpers, which its text carries): it reaches @bufbuild/cel only
 * through `require` of the path the pool passes in workerData, and nothing of this module's
 * scope. Both steps that can take unbounded time on hostile input run here, off the request
 * thread: parsing (the parser backtracks: a few KiB of nested operators can take seconds) and
 * evaluation. The pool times each step and terminates the worker when a budget runs out.
 *
 * Messages in:  { id, op: 'parse', expression }
 *               { id, op: 'evaluate', expressions, activation }
 * Messages out: { ready: true } once, then
 *               { id, ast } | { id, error }                           for a parse,
 *               { id, index, matched, error, ms } per expression, then { id, done: true }.
 */
export function policyWorkerMain(): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const threads = require('node:worker_threads') as typeof import('node:worker_threads');
  const workerData = threads.workerData as {
    celPath: string;
    celExtPath: string;
    replies: import('node:worker_threads').MessagePort;
  };
  const fs = require('node:fs') as typeof import('node:fs');
  const cel = require(workerData.celPath) as typeof import('@bufbuild/cel');
  const ext = require(workerData.celExtPath) as typeof import('@bufbuild/cel/ext');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const env = cel.celEnv({ funcs: ext.strings });
  const programs = new Map<string, ReturnType<typeof cel.plan>>();
  const program = (expression: string) => {
    let found = programs.get(expression);
    if (!found) {
      found = cel.plan(env, cel.parse(expression));
      if (programs.size >= 256) programs.delete(programs.keys().next().value!);
      programs.set(expression, found);
    }
    return found;
  };
  // This thread's own CPU time (Linux), so that a budget is not spent waiting for a core.
  let cpuClock: (() => number) | null = null;
  try {
    const read = () =>
      Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
    if (Number.isFinite(read())) cpuClock = read;
  } catch {
    cpuClock = null;
  }
  const tid = cpuClock ? ownThread(false) : null;
  const clock = cpuClock ?? (() => performance.now());
  const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
  // An evaluation error is stored with the plan's results and in the audit log, which every
  // reader of the environment sees: it says what kind of error the expression met, never
  // the text of a value (CEL's own messages quote them: "Cannot convert <value> to a BigInt").
  const kinds: [RegExp, string][] = [
    [/no matching overload/i, 'no function matches the argument types'],
    [/type mismatch|unsupported key type/i, 'a value has the wrong type'],
    [/overflow/i, 'a number overflowed'],
    [/divide by zero|modulus by zero/i, 'division by zero'],
    [/out of bounds/i, 'a list index is out of bounds'],
    [/no such key|key not found/i, 'a map has no such key'],
    [/field not found|no such field|unresolved attribute|undeclared reference/i, 'no such field'],
    [/convert|bigint|invalid|parse|syntax/i, 'a value could not be converted'],
    [/maximum call stack|invalid string length|array length/i, 'the evaluation ran out of room'],
  ];
  const kindOf = (error: unknown) => {
    const text = messageOf(error);
    for (const [pattern, kind] of kinds) if (pattern.test(text)) return kind;
    return 'the expression failed';
  };
  // Requests arrive on parentPort; replies go to their own port, which the pool can drain
  // synchronously (a reply that is already there never counts as a budget run out).
  const port = workerData.replies;
  threads.parentPort!.on(
    'message',
    (message: {
      id: number;
      op: 'parse' | 'evaluate';
      expression?: string;
      expressions?: string[];
      activation?: Record<string, unknown>;
    }) => {
      if (message.op === 'parse') {
        try {
          const parsed = cel.parse(message.expression!);
          port.postMessage({
            id: message.id,
            ast: { expr: parsed.expr, sourceInfo: parsed.sourceInfo },
          });
        } catch (error) {
          port.postMessage({ id: message.id, error: messageOf(error) });
        }
        return;
      }
      // The activation has arrived (its copy is made): the budgets count from here.
      port.postMessage({ id: message.id, started: true });
      for (const [index, expression] of message.expressions!.entries()) {
        const started = clock();
        let matched: boolean | null = null;
        let error: string | null = null;
        try {
          const value = program(expression)(message.activation as never);
          if (cel.isCelError(value)) error = kindOf(value);
          else if (typeof value === 'boolean') matched = value;
          else error = `the expression evaluated to ${typeof value}, not a bool`;
        } catch (thrown) {
          error = kindOf(thrown);
        }
        port.postMessage({
          id: message.id,
          index,
          matched,
          error,
          ms: clock() - started,
        });
      }
      port.postMessage({ id: message.id, done: true });
    },
  );
  // Warm up the interpreter before the first budget counts: a cold worker walks a plan's
  // resource changes several times slower than a warm one.
  const changes = Array.from({ length: 2000 }, (_, i) => ({
    address: `r.a[${i}]`,
    type: 'aws_instance',
    actions: ['update'],
    before: { tags: { n: String(i) } },
    after: { tags: { n: String(i) } },
  }));
  const warm = {
    plan: {
      environment: 'warm',
      title: 'warm',
      contentType: 'TEXT',
      contentBytes: 1n,
      submitterGroups: ['a'],
    },
    summary: { add: 0n, change: 2000n, destroy: 0n, replace: 0n, resourceChanges: changes },
    terraform: { format_version: '1.2', resource_changes: changes },
  };
  for (let round = 0; round < 3; round++) {
    for (const expression of [
      'summary.resourceChanges.exists(r, "delete" in r.actions && r.type.matches("^aws_db_.*$"))',
      'summary.resourceChanges.exists(r, r.type.startsWith("aws_iam_"))',
      'summary.resourceChanges.filter(r, r.actions == ["update"]).size() > summary.add + summary.destroy',
      'terraform.resource_changes.all(c, c.type != "" && has(c.address))',
      'plan.environment == "prod" && "a" in plan.submitterGroups && plan.title.lowerAscii().contains("x")',
    ]) {
      try {
        program(expression)(warm);
      } catch {
        // Only warming.
      }
    }
  }
  threads.parentPort!.postMessage({ ready: true, tid: cpuClock ? tid : null });
}
