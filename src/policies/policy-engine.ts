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
import { budgetLeft, threadCpuMs } from '../terraform/thread-cpu.js';
import { workerSource } from '../common/worker-source.js';

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

/**
 * Which workers a job runs on. Submits (`submit`) have `PLANFENCE_POLICY_WORKERS` of their
 * own; everything else (`trial`: parsing expressions when policies are saved or tried,
 * evaluating a dry run) has one worker of its own, so that dry runs and policy edits, however
 * many and however slow, never make a submit wait for a worker.
 */
export type Lane = 'submit' | 'trial';

interface Pool {
  slots: Slot[];
  free: Slot[];
  waiting: ((slot: Slot) => void)[];
}

interface Slot {
  worker: Worker | null;
  /** Where the worker's replies arrive. */
  replies: MessagePort | null;
  ready: Promise<void> | null;
  /** The running job's handlers, while one runs. */
  onReply: ((reply: Reply) => void) | null;
  onStop: ((reason: string) => void) | null;
  /** The worker's thread id, where its CPU time can be read (Linux), else null. */
  tid?: number | null;
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
  private readonly pools: Record<Lane, Pool>;
  private nextId = 0;
  private closed = false;

  readonly evaluations: Counter<'outcome'>;
  readonly replacements: Counter;

  constructor(@Inject(CONFIG) config: Config, metrics: MetricsService) {
    this.budgets = config.policies;
    const pool = (workers: number): Pool => {
      const slots = Array.from({ length: workers }, () => ({
        worker: null,
        replies: null,
        ready: null,
        onReply: null,
        onStop: null,
      }));
      return { slots, free: [...slots], waiting: [] };
    };
    this.pools = { submit: pool(this.budgets.workers), trial: pool(1) };
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
    await Promise.all(
      [...this.pools.submit.slots, ...this.pools.trial.slots].map((slot) =>
        this.stop(slot, 'the service is stopping'),
      ),
    );
  }

  /** Parses one expression (for the type check that follows on this thread), on the trial lane. */
  parse(expression: string): Promise<ParseOutcome> {
    return this.withSlot('trial', async (slot) => {
      const id = ++this.nextId;
      return new Promise<ParseOutcome>((resolve) => {
        let answered = false;
        const budget = this.budgets.parseBudgetMs;
        const wall = performance.now();
        const cpu = this.cpuOf(slot) ?? 0;
        let timer: NodeJS.Timeout;
        const wait = (ms: number) => {
          timer = setTimeout(() => {
            this.drain(slot);
            if (answered) return;
            // The worker waited for a core rather than ran: the rest of its budget is still its.
            const left = this.left(slot, cpu, wall, budget);
            if (left > 0) return wait(Math.max(1, left));
            void this.stop(slot, 'parse budget');
            resolve({ error: `parsing took longer than ${budget} ms` });
          }, ms);
        };
        wait(budget);
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
    lane: Lane = 'submit',
  ): Promise<EvaluationOutcome[]> {
    if (!expressions.length) return Promise.resolve([]);
    // The parsed document travels to the worker only where some expression can read it.
    const sent = expressions.some((e) => e.includes('terraform'))
      ? activation
      : { ...activation, terraform: null };
    return this.withSlot(lane, async (slot) => {
      const id = ++this.nextId;
      const { policyBudgetMs, planBudgetMs } = this.budgets;
      const outcomes: EvaluationOutcome[] = [];
      const outcome = await new Promise<EvaluationOutcome[]>((resolve) => {
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
        // Each budget counts the worker thread's own CPU time where the system tells it
        // (threadCpuMs), so that time spent waiting for a core (two busy workers and the
        // request thread on a 2-core machine) is not charged to the expression.
        let policyCpu = 0;
        let policyWall = 0;
        let planCpu = 0;
        let planWall = 0;
        const arm = () => {
          policyWall = performance.now();
          policyCpu = this.cpuOf(slot) ?? 0;
          wait();
        };
        const wait = () => {
          clearTimeout(timer);
          const policyLeft = this.left(slot, policyCpu, policyWall, policyBudgetMs);
          const planLeft = started ? this.left(slot, planCpu, planWall, planBudgetMs) : Infinity;
          timer = setTimeout(
            () => {
              // A stalled request thread can fire this after the worker answered: read first.
              const progress = outcomes.length;
              this.drain(slot);
              if (settled || outcomes.length !== progress) return;
              const policyNow = this.left(slot, policyCpu, policyWall, policyBudgetMs);
              const planNow = this.left(slot, planCpu, planWall, planBudgetMs);
              // The worker waited for a core rather than ran: the rest of its budget is still its.
              if (Math.min(policyNow, planNow) > 0) return wait();
              void this.stop(slot, 'evaluation budget');
              finish(
                planNow <= policyNow
                  ? `the plan's policies ran past their budget of ${planBudgetMs} ms`
                  : `evaluation ran past its budget of ${policyBudgetMs} ms`,
              );
            },
            Math.max(1, Math.min(policyLeft, planLeft)),
          );
        };
        slot.onStop = (reason) => finish(`the evaluation stopped: ${reason}`);
        slot.onReply = (reply) => {
          if (reply.id !== id) return;
          if (reply.started) {
            started = true;
            planWall = performance.now();
            planCpu = this.cpuOf(slot) ?? 0;
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

  /**
   * Runs `job` on a free, started worker of `lane`; the worker is free again when the job
   * ends. The job's budgets start when the worker has it: time waiting here never counts.
   */
  private async withSlot<T>(lane: Lane, job: (slot: Slot) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error('the policy engine is stopped');
    const pool = this.pools[lane];
    const slot =
      pool.free.pop() ?? (await new Promise<Slot>((resolve) => pool.waiting.push(resolve)));
    try {
      await this.start(slot);
      return await job(slot);
    } finally {
      slot.onReply = null;
      slot.onStop = null;
      const next = pool.waiting.shift();
      if (next) next(slot);
      else pool.free.push(slot);
    }
  }

  private left(slot: Slot, cpu: number, wall: number, budget: number): number {
    return budgetLeft(slot.tid, cpu, wall, budget);
  }

  /** The CPU time of the slot's worker thread in ms, or null where the system does not tell it. */
  private cpuOf(slot: Slot): number | null {
    return slot.tid == null ? null : threadCpuMs(slot.tid);
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
    const worker = new Worker(workerSource(policyWorkerMain), {
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
      worker.on('message', (reply: { ready?: boolean; tid?: number | null }) => {
        if (!reply.ready) return;
        slot.tid = reply.tid != null && threadCpuMs(reply.tid) !== null ? reply.tid : null;
        resolve();
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
