/**
 * `planfence runner`: the long-running DEPLOYER process (DESIGN §15, docs/runner.md). It alone
 * holds the cloud credentials; it waits for publications of its environments over the
 * `planPublished` subscription (never by polling) and applies each published Terraform plan
 * that no deployment has taken yet, one at a time per environment, under R55 (the plan file
 * is the reviewed plan) and R56 (the state after the apply is reported). On start and after
 * each reconnect it checks every environment's current plan once, so a publication missed
 * while the socket was down is not lost.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseYaml } from './yaml.js';
import { PlanfenceClient } from '../../client/client.js';
import { Deployments } from '../../client/deployments.js';
import {
  NotFoundError,
  PlanfenceError,
  TransportError,
  UnauthenticatedError,
} from '../../client/errors.js';
import { GraphQLSocket, WebSocketUnavailableError } from '../../client/subscriptions.js';
import { readInput, UsageError } from '../command.js';
import { APPLY_EXIT, exitCodeOf } from '../exit-codes.js';
import {
  type ApplyStep,
  applyTerraformPlan,
  DeploymentNotReported,
  TerraformApplyFailed,
} from './terraform.js';

export const RUNNER_HELP = `Usage: planfence runner ENV... --terraform --chdir DIR [--heartbeat SECONDS] [--grace SECONDS] [--verbose]
       planfence runner --config FILE [--heartbeat SECONDS] [--grace SECONDS] [--verbose]
                       [--url URL] [--token TOKEN]

The DEPLOYER process that applies what reviewers publish (docs/runner.md). It waits for
publications of each environment (the planPublished subscription), and applies each published
Terraform plan no deployment has taken yet, one at a time per environment: starts a deployment
(heartbeats), checks that the plan file renders as the reviewed plan (else FAILED, terraform
apply does not run), runs terraform apply in the environment's working directory, and reports
the outcome with the state's lineage and serial. One line per step on stderr.

  ENV... --terraform --chdir DIR   the environments, all applied in DIR (one at a time)
  --config FILE                    YAML or JSON: environments: { prod: ./infra/prod, ... }
                                   (a directory, or { chdir: DIR }; relative to the file),
                                   heartbeatSeconds, graceSeconds
  --heartbeat SECONDS              the deployments' heartbeat, 5-3600 (default 60)
  --grace SECONDS                  on SIGTERM/SIGINT, how long a running terraform may take to
                                   finish before it is interrupted (default 300)
  --verbose                        terraform's output on stderr as well

Exit codes: 0 stopped by SIGTERM/SIGINT with every deployment reported; 2 bad usage or
configuration, or no WebSocket (Node.js 22 or later, or the ws package); 3 the token is refused or is not a DEPLOYER's; 4 an environment does not
exist; 11 stopped with a deployment it could not report (it reads UNKNOWN once its heartbeat
lapses: reconcile it).`;

/** One environment the runner serves. */
interface Target {
  environment: string;
  /** The Terraform working directory (absolute). */
  chdir: string;
}

interface Settings {
  targets: Target[];
  heartbeatSeconds: number;
  graceSeconds: number;
  verbose: boolean;
  url: string;
  token: string;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** Seconds as a whole number within bounds, or a UsageError naming the option. */
function seconds(value: unknown, what: string, min: number, max: number): number {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`${what} must be a whole number of seconds, ${min} to ${max}`);
  return n;
}

function directory(path: string, environment: string): string {
  if (!existsSync(path) || !statSync(path).isDirectory())
    throw new UsageError(`the working directory of ${environment}, ${path}, is not a directory`);
  return path;
}

/** The environments and working directories of a --config file (YAML or JSON). */
function readConfig(file: string): {
  targets: Target[];
  heartbeatSeconds?: number;
  graceSeconds?: number;
} {
  let config: unknown;
  try {
    config = parseYaml(readInput(file, 'runner configuration'));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${file} is not YAML or JSON: ${(error as Error).message}`);
  }
  const shape = config as {
    environments?: unknown;
    heartbeatSeconds?: unknown;
    graceSeconds?: unknown;
  } | null;
  const environments = shape?.environments;
  if (!environments || typeof environments !== 'object' || Array.isArray(environments))
    throw new UsageError(
      `${file}: "environments" must map each environment to its working directory`,
    );
  const base = dirname(resolve(file));
  const targets = Object.entries(environments as Record<string, unknown>).map(
    ([environment, value]) => {
      if (!NAME.test(environment))
        throw new UsageError(`${file}: "${environment}" is not an environment name`);
      const dir = typeof value === 'string' ? value : (value as { chdir?: unknown } | null)?.chdir;
      if (typeof dir !== 'string' || !dir)
        throw new UsageError(
          `${file}: environments.${environment} must be a directory or { chdir: DIR }`,
        );
      return { environment, chdir: directory(resolve(base, dir), environment) };
    },
  );
  if (!targets.length) throw new UsageError(`${file}: "environments" is empty`);
  return {
    targets,
    heartbeatSeconds:
      shape?.heartbeatSeconds === undefined
        ? undefined
        : seconds(shape.heartbeatSeconds, `${file}: heartbeatSeconds`, 5, 3600),
    graceSeconds:
      shape?.graceSeconds === undefined
        ? undefined
        : seconds(shape.graceSeconds, `${file}: graceSeconds`, 0, 86_400),
  };
}

function settings(argv: string[]): Settings | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', default: false },
      terraform: { type: 'boolean', default: false },
      chdir: { type: 'string' },
      config: { type: 'string' },
      heartbeat: { type: 'string' },
      grace: { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  let targets: Target[];
  let fromFile: ReturnType<typeof readConfig> | null = null;
  if (values.config !== undefined) {
    if (positionals.length || values.chdir !== undefined)
      throw new UsageError('runner: give either --config FILE or ENV... --chdir DIR, not both');
    fromFile = readConfig(values.config);
    targets = fromFile.targets;
  } else {
    if (!positionals.length || !values.terraform || values.chdir === undefined)
      throw new UsageError(
        'usage: planfence runner ENV... --terraform --chdir DIR (or --config FILE); see planfence runner --help',
      );
    const chdir = resolve(values.chdir);
    targets = [...new Set(positionals)].map((environment) => {
      if (!NAME.test(environment))
        throw new UsageError(`"${environment}" is not an environment name`);
      return { environment, chdir: directory(chdir, environment) };
    });
  }
  const token = values.token ?? process.env.PLANFENCE_TOKEN;
  if (!token) throw new UsageError('no token: pass --token or set PLANFENCE_TOKEN');
  return {
    targets,
    heartbeatSeconds:
      values.heartbeat !== undefined
        ? seconds(values.heartbeat, '--heartbeat', 5, 3600)
        : (fromFile?.heartbeatSeconds ?? 60),
    graceSeconds:
      values.grace !== undefined
        ? seconds(values.grace, '--grace', 0, 86_400)
        : (fromFile?.graceSeconds ?? 300),
    verbose: values.verbose,
    url: values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000',
    token,
  };
}

/** `CODE (key=value, ...): message`, as the CLI prints a refusal. */
function refusal(error: PlanfenceError): string {
  const details = Object.entries(error.extensions)
    .filter(([key]) => key !== 'code')
    .map(
      ([key, value]) =>
        `${key}=${typeof value === 'object' ? JSON.stringify(value) : String(value as string)}`,
    );
  return `${error.code}${details.length ? ` (${details.join(', ')})` : ''}: ${error.message}`;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((done) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        done();
      },
      { once: true },
    );
  });

/** What the runner knows of one environment. */
interface Watched extends Target {
  /** A check was asked for while one ran: run another after it. */
  wanted: boolean;
  running: Promise<void> | null;
  /** Plans this process has taken (started, or refused at start): never taken twice. */
  taken: Set<string>;
  /** The deployment being carried through, for the log lines of a stop. */
  applying: { planId: string; deploymentId: string } | null;
}

/** After a stop, how long a terraform that was interrupted may take to exit. */
const INTERRUPTED_EXIT_MS = 60_000;

class Runner {
  private readonly client: PlanfenceClient;
  private readonly deployments: Deployments;
  private readonly watched: Watched[];
  /** Per working directory: the end of the apply that holds it (one terraform per directory). */
  private readonly directories = new Map<string, Promise<void>>();
  /** Aborted on SIGTERM/SIGINT: no new deployment starts, the socket closes. */
  private readonly stopping = new AbortController();
  /** Aborted when the grace period is over: a running terraform is interrupted. */
  private readonly interrupt = new AbortController();
  private socket: GraphQLSocket | null = null;
  /** A deployment could not be reported: the exit status says so. */
  private unreported = false;
  /** Set by a refusal that no retry mends (the token): the exit status. */
  private fatal: number | null = null;

  constructor(
    private readonly settings: Settings,
    private readonly log: (line: string) => void,
  ) {
    // A daemon must not wait forever on one request: an unanswered one is a transport failure.
    this.client = new PlanfenceClient({
      url: settings.url,
      token: settings.token,
      requestTimeoutMs: 60_000,
    });
    this.deployments = new Deployments(this.client);
    this.watched = settings.targets.map((target) => ({
      ...target,
      wanted: false,
      running: null,
      taken: new Set(),
      applying: null,
    }));
  }

  /** SIGTERM/SIGINT: stop taking plans; let a running terraform finish within the grace period. */
  stop(signal: string): void {
    if (this.stopping.signal.aborted) {
      // A second signal: stop now. terraform is interrupted and nothing more is reported.
      const left = this.watched.filter((w) => w.applying);
      for (const w of left)
        this.log(
          `runner: ${signal} again: exiting now; ${w.applying!.deploymentId} (${w.applying!.planId}) is not reported: it reads UNKNOWN once its heartbeat lapses, and a reviewer reconciles it (R20)`,
        );
      this.interrupt.abort(new Error(`the runner got ${signal} twice`));
      process.exit(left.length ? APPLY_EXIT.NOT_REPORTED : 0);
    }
    this.stopping.abort();
    this.socket?.close();
    const busy = this.watched.filter((w) => w.applying);
    if (!busy.length) {
      this.log(`runner: ${signal}: stopping`);
      return;
    }
    for (const w of busy)
      this.log(
        `runner: ${signal}: stopping once ${w.applying!.deploymentId} (${w.applying!.planId}) is reported; terraform has ${this.settings.graceSeconds} s to finish`,
      );
    const grace = setTimeout(() => {
      for (const w of this.watched.filter((x) => x.applying))
        this.log(
          `runner: grace period over: interrupting terraform for ${w.applying!.deploymentId} (${w.applying!.planId})`,
        );
      this.interrupt.abort(new Error('the runner stopped: grace period over'));
    }, this.settings.graceSeconds * 1000);
    grace.unref();
  }

  async run(): Promise<number> {
    // The service may not be up yet (a host starting): wait for it, as for a reconnect.
    for (let delayMs = 500; ; delayMs = Math.min(delayMs * 2, 15_000)) {
      try {
        await this.admitted();
        break;
      } catch (error) {
        if (!(error instanceof TransportError)) throw error;
        this.log(`runner: ${error.message}; trying again in ${(delayMs / 1000).toFixed(1)} s`);
        await sleep(delayMs, this.stopping.signal);
        if (this.stopping.signal.aborted) return 0;
      }
    }
    this.log(
      `runner: watching ${this.watched.map((w) => `${w.environment} (${w.chdir})`).join(', ')} at ${this.settings.url}`,
    );
    let delayMs = 500;
    while (!this.stopping.signal.aborted && this.fatal === null) {
      try {
        await this.connected();
        delayMs = 500;
      } catch (error) {
        if (error instanceof UnauthenticatedError) {
          this.log(`runner: the token is refused: ${refusal(error)}`);
          this.fatal = 3;
          break;
        }
        if (error instanceof WebSocketUnavailableError) {
          this.log(`runner: ${error.message}`);
          this.fatal = 2;
          break;
        }
        this.log(`runner: cannot subscribe: ${(error as Error).message}`);
      }
      if (this.stopping.signal.aborted || this.fatal !== null) break;
      const wait = delayMs * (0.5 + Math.random() / 2);
      this.log(`runner: reconnecting in ${(wait / 1000).toFixed(1)} s`);
      await sleep(wait, this.stopping.signal);
      delayMs = Math.min(delayMs * 2, 15_000);
    }
    await this.drained();
    if (this.fatal !== null) return this.fatal;
    this.log(`runner: stopped${this.unreported ? ' with a deployment not reported' : ''}`);
    return this.unreported ? APPLY_EXIT.NOT_REPORTED : 0;
  }

  /** The token is a DEPLOYER's (or an ADMIN's) and every environment exists; else a refusal is thrown. */
  private async admitted(): Promise<void> {
    const me = await this.client.whoami();
    if (me.role !== 'ADMIN' && me.role !== 'DEPLOYER')
      throw new PlanfenceError({
        message: `the runner needs a DEPLOYER token; this one is ${me.name}'s, a ${me.role}`,
        extensions: { code: 'FORBIDDEN' },
      });
    for (const w of this.watched) {
      try {
        await this.client.deploymentSequence(w.environment);
      } catch (error) {
        if (error instanceof NotFoundError)
          throw new NotFoundError({
            message: `environment "${w.environment}" does not exist`,
            extensions: { code: 'NOT_FOUND' },
          });
        throw error;
      }
    }
  }

  /**
   * One socket's life: open it, subscribe to each environment from its current plan on,
   * check each environment once, and wait until the socket ends (or the runner stops).
   */
  private async connected(): Promise<void> {
    const socket = await GraphQLSocket.open({ url: this.settings.url, token: this.settings.token });
    this.socket = socket;
    if (this.stopping.signal.aborted) socket.close();
    try {
      for (const w of this.watched) {
        // From the plan current now: the service sends every publication after it, so none
        // between this read and the subscription is missed.
        const current = await this.client.currentPlan(w.environment);
        const resync = () => socket.close();
        socket.subscribe<{ planPublished: { id: string } }>(
          `subscription($e: String!, $after: ID) { planPublished(environment: $e, after: $after) { id } }`,
          { e: w.environment, after: current?.id ?? null },
          {
            next: (data) => {
              this.log(`runner: ${data.planPublished.id} published`);
              this.check(w);
            },
            error: (error) => {
              this.log(`runner: the subscription to ${w.environment} ended: ${refusal(error)}`);
              resync();
            },
            complete: () => {
              this.log(`runner: the service ended the subscription to ${w.environment}`);
              resync();
            },
          },
        );
      }
      this.log(`runner: subscribed; checking ${this.watched.map((w) => w.environment).join(', ')}`);
      for (const w of this.watched) this.check(w);
      const closed = await socket.closed;
      if (!this.stopping.signal.aborted)
        this.log(
          `runner: connection lost (${closed.code}${closed.reason ? ` ${closed.reason}` : ''})`,
        );
    } finally {
      socket.close();
      this.socket = null;
    }
  }

  /** Asks for a check of the environment's current plan; one runs at a time per environment. */
  private check(w: Watched): void {
    w.wanted = true;
    if (w.running) return;
    w.running = (async () => {
      while (w.wanted && !this.stopping.signal.aborted) {
        w.wanted = false;
        await this.inDirectory(w.chdir, () => this.deployCurrent(w));
      }
    })().finally(() => (w.running = null));
  }

  /** Runs `work` once the directory's previous apply has ended: one terraform per working directory. */
  private async inDirectory(dir: string, work: () => Promise<void>): Promise<void> {
    const before = this.directories.get(dir) ?? Promise.resolve();
    const mine = before.then(work, work);
    const tail = mine.catch(() => undefined);
    this.directories.set(dir, tail);
    await mine;
    if (this.directories.get(dir) === tail) this.directories.delete(dir);
  }

  /** Applies the environment's current plan unless a deployment (this runner's or another's) took it. */
  private async deployCurrent(w: Watched): Promise<void> {
    if (this.stopping.signal.aborted) return;
    let planId: string | undefined;
    try {
      const current = await this.client.currentPlan(w.environment);
      if (!current || w.taken.has(current.id)) return;
      planId = current.id;
      const [latest] = await this.deployments.list(w.environment, { first: 1 });
      if (latest?.plan.id === current.id) {
        w.taken.add(current.id);
        return;
      }
      if (this.stopping.signal.aborted) return;
      w.taken.add(current.id);
      const { deployment, state } = await applyTerraformPlan(
        this.client,
        this.deployments,
        w.environment,
        {
          planId: current.id,
          chdir: w.chdir,
          heartbeatSeconds: this.settings.heartbeatSeconds,
          interrupt: this.interrupt.signal,
          detached: true,
          echo: this.settings.verbose ? (chunk) => process.stderr.write(chunk) : undefined,
          onStep: (step) => this.stepped(w, step),
        },
      );
      this.log(
        `runner: ${current.id} applied, ${deployment.status} (${deployment.id})${state ? `, state serial ${state.serial}` : ', state not read'}`,
      );
    } catch (error) {
      await this.failed(w, planId, error);
    } finally {
      w.applying = null;
    }
  }

  private stepped(w: Watched, step: ApplyStep): void {
    switch (step.step) {
      case 'started':
        w.applying = { planId: step.plan.id, deploymentId: step.deployment.id };
        this.log(
          `runner: ${step.plan.id} started ${step.deployment.id} (sequence ${step.deployment.sequence}) in ${w.chdir}`,
        );
        return;
      case 'verified':
        this.log(`runner: ${step.plan.id} verified: the plan file is the reviewed plan`);
        return;
      case 'applying':
        this.log(`runner: ${step.plan.id} applying`);
        return;
      case 'applied':
        return;
    }
  }

  /** One line for whatever stopped a plan; a finish the service did not take is sent again. */
  private async failed(w: Watched, planId: string | undefined, error: unknown): Promise<void> {
    const plan = planId ?? w.environment;
    if (error instanceof TerraformApplyFailed) {
      const state = error.state ? `, state serial ${error.state.serial}` : '';
      this.log(
        error.notReviewed
          ? `runner: ${plan} refused, ${error.deployment.id} FAILED: ${error.message}; terraform apply did not run`
          : `runner: ${plan} applied, FAILED (${error.deployment.id}): ${error.message}${state}`,
      );
      return;
    }
    if (error instanceof DeploymentNotReported) {
      await this.reportLate(plan, error);
      return;
    }
    if (error instanceof UsageError) {
      this.log(`runner: ${plan} skipped: ${error.message}`);
      return;
    }
    if (error instanceof PlanfenceError) {
      this.log(`runner: ${plan} refused at start: ${refusal(error)}`);
      if (error.code === 'UNAUTHENTICATED') {
        this.fatal = exitCodeOf(error.code);
        this.stopping.abort();
        this.socket?.close();
      }
      return;
    }
    if (error instanceof TransportError) {
      // Not started, or not known to be: checked again once the socket is back.
      if (planId) w.taken.delete(planId);
      this.log(`runner: ${plan} not started: ${error.message}; checked again on reconnect`);
      return;
    }
    this.log(`runner: ${plan} not applied: ${(error as Error).message}`);
  }

  /**
   * The outcome did not get through. While the service is away (a transport failure) the same
   * finish is sent again with back-off (an UNKNOWN deployment may still be finished by its
   * starter until someone reconciles it, R19); a refusal, or a stop, leaves it to a reviewer.
   */
  private async reportLate(plan: string, error: DeploymentNotReported): Promise<void> {
    let cause: unknown = error.cause;
    let delayMs = 1000;
    while (cause instanceof TransportError && !this.stopping.signal.aborted) {
      this.log(
        `runner: ${plan} ${error.outcome} not reported yet (${cause.message}); sending it again in ${Math.round(delayMs / 1000)} s`,
      );
      await sleep(delayMs, this.stopping.signal);
      delayMs = Math.min(delayMs * 2, 30_000);
      try {
        const finished = await error.report();
        this.log(
          `runner: ${plan} applied, ${finished.status} (${finished.id}), reported late${error.state ? `, state serial ${error.state.serial}` : ''}`,
        );
        return;
      } catch (again) {
        cause = again;
      }
    }
    this.unreported = true;
    const why = cause instanceof PlanfenceError ? refusal(cause) : (cause as Error).message;
    this.log(
      `runner: ${plan} ${error.outcome} could not be reported (${why}): ${error.deployment.id} reads UNKNOWN once its heartbeat lapses, and a reviewer reconciles it (R20)`,
    );
  }

  /** Waits for every check in flight; a terraform that an interrupt did not end is given up on. */
  private async drained(): Promise<void> {
    const running = () =>
      this.watched.map((w) => w.running).filter((p): p is Promise<void> => p !== null);
    const all = Promise.all(running());
    let bound: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<'gave up'>((done) => {
      const arm = () => {
        bound = setTimeout(() => done('gave up'), INTERRUPTED_EXIT_MS);
      };
      if (this.interrupt.signal.aborted) arm();
      else this.interrupt.signal.addEventListener('abort', arm, { once: true });
    });
    const ended = await Promise.race([all.then(() => 'ended' as const), gaveUp]);
    clearTimeout(bound);
    if (ended === 'ended') return;
    for (const w of this.watched.filter((x) => x.applying)) {
      this.unreported = true;
      this.log(
        `runner: terraform did not stop for ${w.applying!.deploymentId} (${w.applying!.planId}); exiting without a report: it reads UNKNOWN once its heartbeat lapses, and a reviewer reconciles it (R20)`,
      );
    }
  }
}

/**
 * Runs `planfence runner ...` until SIGTERM or SIGINT; returns the exit status. Usage and
 * configuration mistakes return 2; refusals at start (the token, an unknown environment) are
 * thrown to main.ts, which maps them by the one table of exit codes.
 */
export async function runner(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
  err: (text: string) => void = (t) => process.stderr.write(`${t}\n`),
): Promise<number> {
  let parsed: Settings | 'help';
  try {
    parsed = settings(argv);
  } catch (error) {
    err(`planfence: ${(error as Error).message}`);
    return 2;
  }
  if (parsed === 'help') {
    out(RUNNER_HELP);
    return 0;
  }
  const runner = new Runner(parsed, err);
  const onSignal = (signal: NodeJS.Signals) => runner.stop(signal);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    return await runner.run();
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
