import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { createRequire } from 'node:module';
import v8 from 'node:v8';
import {
  MessageChannel,
  type MessagePort,
  receiveMessageOnPort,
  Worker,
} from 'node:worker_threads';
import { Counter } from 'prom-client';
import { CONFIG } from '../config/config.module.js';
import type { Config, PoliciesConfig } from '../config/config.js';
import { MetricsService } from '../metrics/metrics.service.js';
import type { AstExpr, AstSourceInfo } from './cel-checker.js';
import type { PolicyActivation } from './activation.js';
import { policyWorkerMain } from './policy-worker.js';

/** One expression's evaluation: whether it matched, or why it could not be decided. */
export interface EvaluationOutcome {
  matched: boolean;
  error: string | null;
}

export type ParseOutcome =
  { ast: { expr: AstExpr; sourceInfo?: AstSourceInfo } } | { error: string };

type Reply = {
  id: number;
  ast?: { expr: AstExpr; sourceInfo?: AstSourceInfo };
  error?: string | null;
  index?: number;
  matched?: boolean | null;
  ms?: number;
  done?: boolean;
  started?: boolean;
};

interface Slot {
  worker: Worker | null;
  /** Where the worker's replies arrive. */
  replies: MessagePort | null;
  ready: Promise<void> | null;
  /** The running job's handlers, while one runs. */
  onReply: ((reply: Reply) => void) | null;
  onStop: ((reason: string) => void) | null;
}

const resolveModule = createRequire(import.meta.url).resolve;

/**
 * A process started with `--max-semi-space-size` (as `npm start` starts the service) would
 * give every worker that young generation too, over its own `maxYoungGenerationSizeMb`: V8
 * reads the flag each time it sizes a new isolate's heap. The service's own heap was sized at
 * start, so the flag is cleared (its default, 0, means "from the isolate's limits") before a
 * worker starts.
 */
function ownYoungGeneration(): void {
  v8.setFlagsFromString('--max-semi-space-size=0');
}

/**
 * Worker threads that parse and evaluate plan policies (DESIGN R35), so that no expression
 * runs on the request thread. Each job gets a free worker (or waits for one); its budget
 * counts from when the worker takes it. A worker whose job runs out of budget, or that dies
 * (out of memory), is terminated and replaced: the request thread never waits on it.
 */
@Injectable()
export class PolicyEngine implements OnModuleDestroy {
  private readonly logger = new Logger(PolicyEngine.name);
  private readonly budgets: PoliciesConfig;
  private readonly slots: Slot[];
  private readonly waiting: ((slot: Slot) => void)[] = [];
  private readonly free: Slot[];
  private nextId = 0;
  private closed = false;

  readonly evaluations: Counter<'outcome'>;
  readonly replacements: Counter;

  constructor(@Inject(CONFIG) config: Config, metrics: MetricsService) {
    this.budgets = config.policies;
    this.slots = Array.from({ length: this.budgets.workers }, () => ({
      worker: null,
      replies: null,
      ready: null,
      onReply: null,
      onStop: null,
    }));
    this.free = [...this.slots];
    this.evaluations = new Counter({
      name: 'planfence_policy_evaluations_total',
      help: 'Plan policy evaluations by outcome: matched, unmatched, error (the expression failed) or budget (it ran out of time); error and budget deny',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
    this.replacements = new Counter({
      name: 'planfence_policy_workers_replaced_total',
      help: 'Policy worker threads terminated (a budget ran out, or the worker died) and replaced',
      registers: [metrics.registry],
    });
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((slot) => this.stop(slot, 'the service is stopping')));
  }

  /** Parses one expression (for the type check that follows on this thread). */
  parse(expression: string): Promise<ParseOutcome> {
    return this.withSlot(async (slot) => {
      const id = ++this.nextId;
      return new Promise<ParseOutcome>((resolve) => {
        let answered = false;
        const timer = setTimeout(() => {
          this.drain(slot);
          if (answered) return;
          void this.stop(slot, 'parse budget');
          resolve({ error: `parsing took longer than ${this.budgets.parseBudgetMs} ms` });
        }, this.budgets.parseBudgetMs);
        slot.onStop = (reason) => {
          clearTimeout(timer);
          resolve({ error: `the parser stopped: ${reason}` });
        };
        slot.onReply = (reply) => {
          if (reply.id !== id) return;
          answered = true;
          clearTimeout(timer);
          resolve(reply.ast ? { ast: reply.ast } : { error: reply.error ?? 'unknown parse error' });
        };
        slot.worker!.postMessage({ id, op: 'parse', expression });
      });
    });
  }

  /**
   * Evaluates each expression against the activation, in order. An expression that fails,
   * or runs past its budget (or past what is left of the plan's), has an error; those after
   * a budget ran out are not evaluated and have an error too.
   */
  evaluate(
    expressions: readonly string[],
    activation: PolicyActivation,
  ): Promise<EvaluationOutcome[]> {
    if (!expressions.length) return Promise.resolve([]);
    // The parsed document travels to the worker only where some expression can read it.
    const sent = expressions.some((e) => e.includes('terraform'))
      ? activation
      : { ...activation, terraform: null };
    return this.withSlot(async (slot) => {
      const id = ++this.nextId;
      const { policyBudgetMs, planBudgetMs } = this.budgets;
      const outcomes: EvaluationOutcome[] = [];
      const outcome = await new Promise<EvaluationOutcome[]>((resolve) => {
        let planDeadline = Infinity;
        let started = false;
        let timer: NodeJS.Timeout | undefined;
        let settled = false;
        const finish = (reason: string | null) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const running = outcomes.length;
          for (let i = running; i < expressions.length; i++) {
            outcomes.push({
              matched: true,
              error: i === running ? (reason ?? 'no result') : `not evaluated: ${reason}`,
            });
          }
          resolve(outcomes);
        };
        const arm = () => {
          clearTimeout(timer);
          const now = performance.now();
          const policyDeadline = now + policyBudgetMs;
          const planFirst = planDeadline <= policyDeadline;
          timer = setTimeout(
            () => {
              // A stalled request thread can fire this after the worker answered: read first.
              const progress = outcomes.length;
              this.drain(slot);
              if (settled || outcomes.length !== progress) return;
              void this.stop(slot, 'evaluation budget');
              finish(
                planFirst
                  ? `the plan's policies ran past their budget of ${planBudgetMs} ms`
                  : `evaluation ran past its budget of ${policyBudgetMs} ms`,
              );
            },
            Math.max(0, Math.min(policyDeadline, planDeadline) - now),
          );
        };
        slot.onStop = (reason) => finish(`the evaluation stopped: ${reason}`);
        slot.onReply = (reply) => {
          if (reply.id !== id) return;
          if (reply.started) {
            started = true;
            planDeadline = performance.now() + planBudgetMs;
            return arm();
          }
          if (reply.done) return finish(null);
          const ms = reply.ms ?? 0;
          outcomes.push(
            ms > policyBudgetMs
              ? { matched: true, error: `evaluation ran past its budget of ${policyBudgetMs} ms` }
              : reply.error != null || reply.matched == null
                ? { matched: true, error: reply.error ?? 'no result' }
                : { matched: reply.matched, error: null },
          );
          arm();
        };
        // Until the worker has its copy of the activation (linear in the plan's size).
        timer = setTimeout(() => {
          const progress = started;
          this.drain(slot);
          if (settled || started !== progress) return;
          void this.stop(slot, 'transfer budget');
          finish(`the plan did not reach the evaluator within ${this.budgets.parseBudgetMs} ms`);
        }, this.budgets.parseBudgetMs);
        slot.worker!.postMessage({ id, op: 'evaluate', expressions, activation: sent });
      });
      for (const o of outcome) {
        this.evaluations.inc({
          outcome: o.error
            ? /budget/.test(o.error)
              ? 'budget'
              : 'error'
            : o.matched
              ? 'matched'
              : 'unmatched',
        });
      }
      return outcome;
    });
  }

  /** Runs `job` on a free, started worker; the worker is free again when the job ends. */
  private async withSlot<T>(job: (slot: Slot) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error('the policy engine is stopped');
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

  /** Handles the replies that have arrived but not been delivered yet. */
  private drain(slot: Slot): void {
    if (!slot.replies) return;
    for (let m = receiveMessageOnPort(slot.replies); m; m = receiveMessageOnPort(slot.replies)) {
      slot.onReply?.(m.message as Reply);
    }
  }

  private start(slot: Slot): Promise<void> {
    if (slot.ready) return slot.ready;
    const { port1, port2 } = new MessageChannel();
    ownYoungGeneration();
    const worker = new Worker(`(${policyWorkerMain.toString()})()`, {
      eval: true,
      workerData: {
        celPath: resolveModule('@bufbuild/cel'),
        celExtPath: resolveModule('@bufbuild/cel/ext'),
        replies: port2,
      },
      transferList: [port2],
      // A runaway list or string ends this worker, not the service. A small young
      // generation: what a worker allocates is the activation it is sent (kept for the
      // evaluation) and short-lived values, and its semi-spaces would otherwise grow to
      // 16 MiB each, resident for the worker's life.
      resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 8 },
    });
    worker.unref();
    port1.on('message', (reply: Reply) => slot.onReply?.(reply));
    port1.unref();
    slot.worker = worker;
    slot.replies = port1;
    slot.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (reply: { ready?: boolean }) => {
        if (reply.ready) resolve();
      });
      worker.on('error', (error) => {
        this.logger.warn(`policy worker failed: ${error.message}`);
        reject(error);
        this.forget(slot, worker, error.message);
      });
      worker.on('exit', (code) => {
        reject(new Error(`policy worker exited (${code})`));
        this.forget(slot, worker, `the worker exited (${code})`);
      });
    });
    return slot.ready;
  }

  /** The worker is gone: its slot starts a new one for the next job. */
  private forget(slot: Slot, worker: Worker, reason: string): void {
    if (slot.worker !== worker) return;
    slot.worker = null;
    slot.replies?.close();
    slot.replies = null;
    slot.ready = null;
    slot.onStop?.(reason);
  }

  private async stop(slot: Slot, reason: string): Promise<void> {
    const worker = slot.worker;
    if (!worker) return;
    slot.worker = null;
    slot.replies?.close();
    slot.replies = null;
    slot.ready = null;
    if (!this.closed) this.replacements.inc();
    this.logger.debug(`policy worker terminated: ${reason}`);
    await worker.terminate();
  }
}
