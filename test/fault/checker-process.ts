/** The harness's handle on one CHECKER process (checker.ts): wait for its steps, freeze it, thaw it. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { distFile } from './service.js';

export interface CheckerStep {
  step: 'read' | 'result';
  planId?: string;
  /** The plan's status as read, or as the report left it, or INVALID_PLAN_STATE's. */
  status?: string;
  code?: string;
  message?: string;
}

export class CheckerProcess {
  private readonly child: ChildProcess;
  private readonly steps: CheckerStep[] = [];
  private waiters: (() => void)[] = [];
  private closed = false;
  readonly exited: Promise<void>;

  constructor(url: string, token: string, planId: string, name: string) {
    this.child = spawn(
      process.execPath,
      [distFile('test/fault/checker.js'), url, token, planId, name],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.steps.push(JSON.parse(line) as CheckerStep);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.child.on('error', (error) =>
      this.steps.push({ step: 'result', code: `CHECKER_FAILED: ${error.message}` }),
    );
    this.exited = new Promise((resolve) => this.child.once('close', () => resolve()));
    void this.exited.then(() => {
      this.closed = true;
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves when the checker reports `step` (or its result, whichever comes first). */
  async until(step: CheckerStep['step']): Promise<CheckerStep> {
    for (;;) {
      const seen =
        this.steps.find((s) => s.step === step) ?? this.steps.find((s) => s.step === 'result');
      if (seen) return seen;
      if (this.closed) throw new Error(`checker exited before ${step}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Lets the checker, held after reading the plan, send its report. */
  goAhead(): void {
    this.child.stdin?.end('go\n');
  }

  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  thaw(): void {
    this.child.kill('SIGCONT');
  }

  kill(): void {
    if (!this.closed) this.child.kill('SIGKILL');
  }
}
