import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';
import {
  MessageChannel,
  type MessagePort,
  receiveMessageOnPort,
  Worker,
} from 'node:worker_threads';
import { InputError } from '../common/errors.js';
import type { MaskedTerraformPlan, ParsedTerraformPlan } from './terraform-plan.js';
import { TerraformPlanError } from './terraform.errors.js';
import { terraformWorkerMain } from './terraform-worker.js';
import { budgetLeft, threadCpuMs } from './thread-cpu.js';
import { workerSource } from '../common/worker-source.js';

type Reply = {
  id: number;
  started?: boolean;
  parsed?: ParsedTerraformPlan | MaskedTerraformPlan;
  error?: string;
  input?: boolean;
};

interface Slot {
  worker: Worker | null;
  replies: MessagePort | null;
  ready: Promise<void> | null;
  onReply: ((reply: Reply) => void) | null;
  onStop: ((reason: string) => void) | null;
  /** The worker's thread id, where its CPU time can be read (Linux). */
  tid?: number | null;
}

export interface TerraformParserOptions {
  /** What parsing, summarising and masking one document may take, counted from when a worker has it. */
  budgetMs: number;
  /** Worker threads: documents handled at once; others wait for one (their budget not running). */
  workers: number;
  /** The variable that sets `budgetMs`, named in refusals. */
  budgetVariable: string;
}

/**
 * Worker threads that parse, summarise and mask Terraform plan documents
 * (`parseTerraformPlan`, DESIGN R31, R54), so that no document is read on the request
 * thread: a 1 MiB document of long strings costs a worker hundreds of milliseconds, and the
 * service answers meanwhile. Each document gets a free worker (or waits for one); its budget
 * counts from when the worker has received it, never time spent waiting. A document that
 * runs out of budget is refused (BAD_USER_INPUT {limit: "terraformParseMs", max}) and its
 * worker terminated and replaced.
 */
export class TerraformParser {
  private readonly slots: Slot[];
  private readonly free: Slot[];
  private readonly waiting: ((slot: Slot) => void)[] = [];
  private nextId = 0;
  private closed = false;
  private bundle: { entry: string; modules: Record<string, string> } | null | undefined;

  constructor(private readonly options: TerraformParserOptions) {
    this.slots = Array.from({ length: options.workers }, () => ({
      worker: null,
      replies: null,
      ready: null,
      onReply: null,
      onStop: null,
    }));
    this.free = [...this.slots];
  }

  /**
   * `parseTerraformPlan(content)` on a worker: the parse (`whole`), or only its masked content
   * and summary; or TerraformPlanError for a document that is not a plan, or the budget
   * refusal.
   */
  parse(content: string, whole?: true): Promise<ParsedTerraformPlan>;
  parse(content: string, whole: false): Promise<MaskedTerraformPlan>;
  parse(content: string, whole = true): Promise<ParsedTerraformPlan | MaskedTerraformPlan> {
    return this.withSlot(
      (slot) =>
        new Promise<ParsedTerraformPlan | MaskedTerraformPlan>((done, fail) => {
          const id = ++this.nextId;
          const { budgetMs, budgetVariable } = this.options;
          let timer: NodeJS.Timeout | undefined;
          let settled = false;
          const settle = (outcome: () => void) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            outcome();
          };
          const overBudget = () =>
            new InputError(
              'BAD_USER_INPUT',
              `reading this Terraform plan document took longer than ${budgetMs} ms (${budgetVariable}); submit a smaller plan`,
              { limit: 'terraformParseMs', max: budgetMs },
            );
          const arm = (ms: number, what: () => Error) => {
            const wall = performance.now();
            const cpu = (slot.tid != null ? threadCpuMs(slot.tid) : null) ?? 0;
            const wait = (left: number) => {
              clearTimeout(timer);
              timer = setTimeout(() => {
                // A stalled request thread can fire this after the worker answered: read first.
                this.drain(slot);
                if (settled) return;
                // The worker waited for a core rather than ran: the rest of its budget is still its.
                const rest = budgetLeft(slot.tid, cpu, wall, ms);
                if (rest > 0) return wait(Math.max(1, rest));
                void this.stop(slot);
                settle(() => fail(what()));
              }, left);
            };
            wait(ms);
          };
          slot.onStop = (reason) =>
            settle(() => fail(new Error(`the Terraform document worker stopped: ${reason}`)));
          slot.onReply = (reply) => {
            if (reply.id !== id) return;
            if (reply.started) return arm(budgetMs, overBudget);
            if (reply.parsed) return settle(() => done(reply.parsed!));
            settle(() =>
              fail(
                reply.input
                  ? new TerraformPlanError(reply.error ?? 'not a Terraform plan document')
                  : new Error(`reading a Terraform plan document failed: ${reply.error}`),
              ),
            );
          };
          // Until the worker has its copy of the content (linear in its size, bounded by the plan size limit).
          arm(budgetMs, overBudget);
          slot.worker!.postMessage({ id, content, whole });
        }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((slot) => this.stop(slot)));
  }

  private async withSlot<T>(job: (slot: Slot) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error('the Terraform document workers are stopped');
    const slot =
      this.free.pop() ?? (await new Promise<Slot>((resolve) => this.waiting.push(resolve)));
    try {
      await this.start(slot);
      return await job(slot);
    } finally {
      slot.onReply = null;
      slot.onStop = null;
      const next = this.waiting.shift();
      if (next) next(slot);
      else this.free.push(slot);
    }
  }

  private drain(slot: Slot): void {
    if (!slot.replies) return;
    for (let m = receiveMessageOnPort(slot.replies); m; m = receiveMessageOnPort(slot.replies)) {
      slot.onReply?.(m.message as Reply);
    }
  }

  private start(slot: Slot): Promise<void> {
    if (slot.ready) return slot.ready;
    const { port1, port2 } = new MessageChannel();
    const moduleUrl = new URL('./terraform-plan.js', import.meta.url).href;
    this.bundle ??= import.meta.url.endsWith('.ts') ? sourceBundle(import.meta.url) : null;
    const worker = new Worker(workerSource(terraformWorkerMain), {
      eval: true,
      workerData: { moduleUrl, bundle: this.bundle, replies: port2 },
      transferList: [port2],
      // A runaway document ends this worker, not the service.
      resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 16 },
    });
    worker.unref();
    port1.on('message', (reply: Reply) => slot.onReply?.(reply));
    port1.unref();
    slot.worker = worker;
    slot.replies = port1;
    slot.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (reply: { ready?: boolean; tid?: number | null }) => {
        if (!reply.ready) return;
        slot.tid = reply.tid != null && threadCpuMs(reply.tid) !== null ? reply.tid : null;
        resolve();
      });
      worker.on('error', (error) => {
        reject(error);
        this.forget(slot, worker, error.message);
      });
      worker.on('exit', (code) => {
        reject(new Error(`the Terraform document worker exited (${code})`));
        this.forget(slot, worker, `the worker exited (${code})`);
      });
    });
    return slot.ready;
  }

  private forget(slot: Slot, worker: Worker, reason: string): void {
    if (slot.worker !== worker) return;
    slot.worker = null;
    slot.replies?.close();
    slot.replies = null;
    slot.ready = null;
    slot.onStop?.(reason);
  }

  private async stop(slot: Slot): Promise<void> {
    const worker = slot.worker;
    if (!worker) return;
    slot.worker = null;
    slot.replies?.close();
    slot.replies = null;
    slot.ready = null;
    await worker.terminate();
  }
}

/**
 * The service run from its TypeScript sources (the test suite): terraform-plan.ts and the
 * local modules it imports, compiled to CommonJS for the worker's small loader.
 */
function sourceBundle(selfUrl: string): { entry: string; modules: Record<string, string> } {
  const swc = createRequire(selfUrl)('@swc/core') as {
    transformSync(code: string, options: object): { code: string };
  };
  const entry = resolve(dirname(fileURLToPath(selfUrl)), 'terraform-plan.ts');
  const modules: Record<string, string> = {};
  const add = (file: string) => {
    if (modules[file] !== undefined) return;
    const source = readFileSync(file, 'utf8');
    modules[file] = swc.transformSync(source, {
      filename: file,
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'commonjs' },
    }).code;
    for (const [, specifier] of source.matchAll(/from '(\.[^']+)'/g)) {
      add(resolve(dirname(file), specifier).replace(/\.js$/, '.ts'));
    }
  };
  add(entry);
  return { entry, modules };
}
