/** The harness's handle on one agent process: wait for its steps, freeze it, thaw it. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { distFile } from './service.js';

export interface AgentStep {
  step: 'enqueued' | 'acquired' | 'built' | 'sending' | 'result';
  generation?: number;
  /** Why the agent failed (AGENT_FAILED). */
  message?: string;
  /** The lease ticket (`enqueued`, queue mode). */
  ticket?: string;
  code?: string;
  planId?: string;
  fence?: number;
  basedOnDeploymentSequence?: number;
  deploymentSequence?: number;
  /** What the plan holds (`built`, terraform modes: the JSON of `terraform show -json`). */
  content?: string;
  /** PRECONDITION_FAILED's reason: DEPLOYMENT_SEQUENCE, STATE_SERIAL, ... */
  reason?: string;
  /** STATE_SERIAL: the serial the plan was computed from, and the one reported since (R56). */
  priorStateSerial?: number;
  stateSerial?: number;
}

export class AgentProcess {
  private readonly child: ChildProcess;
  private readonly steps: AgentStep[] = [];
  private waiters: (() => void)[] = [];
  /** Set once the process has exited and its stdout is fully read ('close', not 'exit'). */
  private closed = false;
  readonly exited: Promise<void>;

  constructor(
    url: string,
    token: string,
    environment: string,
    ttlSeconds: number,
    readonly content: string,
    stepDelayMs: number,
    /**
     * `bound`: submit the plan as made against the deployment sequence read while building
     * it (R33); `queue`: wait in the lease queue instead of acquiring; `terraform`: plan with
     * terraform in `terraformDir` as `content` (the configuration's `who`), then take a lease
     * and submit the plan file (R56); `terraform-bound`: that, against the deployment sequence
     * read before planning.
     */
    mode: 'acquire' | 'bound' | 'queue' | 'terraform' | 'terraform-bound' = 'acquire',
    /** The agent waits after this step until `goAhead()`: nothing is sent past it before. */
    holdAt?: 'acquired' | 'built',
    /** The Terraform working directory (terraform modes). */
    terraformDir?: string,
  ) {
    this.child = spawn(
      process.execPath,
      [
        distFile('test/fault/agent.js'),
        url,
        token,
        environment,
        String(ttlSeconds),
        content,
        String(stepDelayMs),
        mode,
        holdAt ?? '-',
        ...(terraformDir ? [terraformDir] : []),
      ],
      {
        stdio: [holdAt ? 'pipe' : 'ignore', 'pipe', 'inherit'],
      },
    );
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.steps.push(JSON.parse(line) as AgentStep);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.child.on('error', (error) =>
      this.steps.push({ step: 'result', code: `AGENT_FAILED: ${error.message}` }),
    );
    // 'exit' can come before the last lines of stdout are read; 'close' comes after them.
    this.exited = new Promise((resolve) => this.child.once('close', () => resolve()));
    void this.exited.then(() => {
      this.closed = true;
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves when the agent reports `step` (or its result, whichever comes first). */
  async until(step: AgentStep['step']): Promise<AgentStep> {
    for (;;) {
      const seen =
        this.steps.find((s) => s.step === step) ?? this.steps.find((s) => s.step === 'result');
      if (seen) return seen;
      if (this.closed) throw new Error(`agent exited before ${step}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  result(): Promise<AgentStep> {
    return this.until('result');
  }

  /** Lets an agent held at its `holdAt` step go on. */
  goAhead(): void {
    this.child.stdin?.end('go\n');
  }

  /** SIGSTOP: the process stops where it is, mid-step, with all its memory. */
  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  thaw(): void {
    this.child.kill('SIGCONT');
  }

  /** Ends the process whatever state it is in (frozen included). */
  kill(): void {
    if (!this.closed) this.child.kill('SIGKILL');
  }
}
