/**
 * `planfence runner` with the real `terraform` (skipped where it is not on PATH): the runner
 * is spawned from the built CLI (dist/src/cli/main.js) against the service behind a TCP
 * forwarder whose port stays the same while the service behind it is closed and started
 * again on its SQLite file. It applies what reviewers publish (R55, R56), survives the
 * service going away, never takes a plan twice, and stops on SIGTERM without leaving a
 * deployment silent.
 */
import { jest } from '@jest/globals';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join, relative } from 'node:path';
import { PlanfenceClient } from '../src/client/client.js';
import { ManualClock } from '../src/common/clock.js';
import { PLANFENCE_BIN as BIN, withTerraform } from './support/commands.js';
import { scratchDir, startApp, type TestApp } from './support/app.js';
import { connectMcp } from './support/mcp.js';
import { type Deployment, Deployments } from './support/deployers.js';
import { until } from './support/until.js';
import { ok, World } from './support/world.js';

jest.setTimeout(180_000);

/** A TCP forwarder on a port of its own to the service's current port (none: connections are dropped). */
class Forwarder {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  target: number | null = null;

  async start(): Promise<number> {
    this.server = createServer((client) => {
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => client.destroy());
      if (this.target === null) {
        client.destroy();
        return;
      }
      const upstream = connect(this.target, '127.0.0.1');
      this.sockets.add(upstream);
      upstream.on('close', () => {
        this.sockets.delete(upstream);
        client.destroy();
      });
      upstream.on('error', () => upstream.destroy());
      client.on('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as { port: number }).port;
  }

  /** Drops every open connection (the runner's socket with them). */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

interface Runner {
  child: ChildProcess;
  lines: string[];
  /** The first log line (from `from` on) that matches. */
  line(pattern: RegExp, from?: number): Promise<string>;
  exited: Promise<number | null>;
}

withTerraform('planfence runner', () => {
  const data = scratchDir();
  const dir = scratchDir();
  const clock = new ManualClock();
  const database = `sqlite:${data.path}/planfence.db`;
  const forwarder = new Forwarder();
  let app: TestApp;
  let world: World;
  let d: Deployments;
  let url: string;
  const tokens: Record<string, string> = {};
  const runners: Runner[] = [];

  const serve = async () => {
    app = await startApp({ DATABASE_URL: database }, clock);
    world = new World(app);
    d = new Deployments(world);
    forwarder.target = Number(new URL(app.url).port);
  };

  const run = (file: string, args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        file,
        args,
        { env: { ...process.env, TF_IN_AUTOMATION: '1' }, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      ),
    );
  const tf = (...args: string[]) => run('terraform', [`-chdir=${dir.path}`, ...args]);
  const plan = async (file: string, rev: string, delay = 0, ...extra: string[]) =>
    expect(
      await tf(
        'plan',
        '-input=false',
        '-no-color',
        `-var=rev=${rev}`,
        `-var=delay=${delay}`,
        `-out=${file}`,
        ...extra,
      ),
    ).toMatchObject({ code: 0 });
  const stateFile = () => readFileSync(join(dir.path, 'terraform.tfstate'), 'utf8');
  const state = () => JSON.parse(stateFile()) as { lineage: string; serial: number };
  const appValue = (): string | null =>
    (
      JSON.parse(stateFile()) as {
        resources: { name: string; instances: { attributes: { input: { value: string } } }[] }[];
      }
    ).resources.find((r) => r.name === 'app')?.instances[0].attributes.input.value ?? null;
  const reportedState = async () =>
    ok(
      await world.gql<{
        environment: { terraformState: { lineage: string; serial: number } | null };
      }>(world.admin, '{ environment(name: "infra") { terraformState { lineage serial } } }'),
    ).environment.terraformState;

  /** Submits the plan file (with the content of `contentOf`, default its own) under a fresh lease. */
  const submit = async (file: string, contentOf = file) => {
    const client = new PlanfenceClient({ url: app.url, token: tokens.agent });
    const lease = await client.acquireLease('infra');
    try {
      return await client.submitTerraformPlan({
        environment: 'infra',
        generation: lease.generation,
        planJson: (await tf('show', '-json', contentOf)).stdout,
        planFile: readFileSync(join(dir.path, file)),
      });
    } finally {
      await client.releaseLease('infra', lease.generation);
    }
  };
  const approve = async (planId: string) =>
    ok(
      await world.gql<{ approvePlan: { status: string } }>(
        tokens.reviewer,
        'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { status } }',
        { input: { planId, idempotencyKey: `approve-${planId}` } },
      ),
    ).approvePlan;
  const latest = async (): Promise<Deployment> => (await d.list('infra', 1))[0];

  const startRunner = (...extra: string[]): Runner =>
    spawnRunner(['infra', '--terraform', '--chdir', dir.path, '--heartbeat', '5', ...extra]);
  const spawnRunner = (args: string[]): Runner => {
    const child = spawn(process.execPath, [BIN, 'runner', ...args], {
      env: { ...process.env, PLANFENCE_URL: url, PLANFENCE_TOKEN: tokens.deployer },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let partial = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      partial += chunk;
      const complete = partial.split('\n');
      partial = complete.pop()!;
      lines.push(...complete);
    });
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    const runner: Runner = {
      child,
      lines,
      exited,
      line: (pattern, from = 0) =>
        until(
          `a runner line matching ${pattern}; so far:\n${lines.join('\n')}`,
          () => lines.slice(from).find((l) => pattern.test(l)),
          { progress: () => lines.length, stallMs: 60_000 },
        ),
    };
    runners.push(runner);
    return runner;
  };
  const stopRunner = async (runner: Runner) => {
    if (runner.child.exitCode === null && runner.child.signalCode === null)
      runner.child.kill('SIGTERM');
    return runner.exited;
  };

  beforeAll(async () => {
    url = `http://127.0.0.1:${await forwarder.start()}`;
    await serve();
    tokens.agent = await world.issue('agent', 'AGENT');
    tokens.reviewer = await world.issue('reviewer', 'REVIEWER');
    tokens.deployer = await world.issue('runner', 'DEPLOYER');
    await world.createEnvironment('infra', 'MONOTONIC', true);
    writeFileSync(
      join(dir.path, 'main.tf'),
      `variable "rev" { type = string }
variable "delay" {
  type    = number
  default = 0
}
resource "terraform_data" "app" { input = "app-\${var.rev}" }
# Replaced with every rev: its provisioner makes the apply take "delay" seconds.
resource "terraform_data" "slow" {
  triggers_replace = var.rev
  provisioner "local-exec" { command = "sleep \${var.delay}" }
}
`,
    );
    expect(await tf('init', '-input=false', '-no-color')).toMatchObject({ code: 0 });
  });
  afterEach(async () => {
    for (const runner of runners.splice(0)) {
      runner.child.kill('SIGKILL');
      await runner.exited;
    }
  });
  afterAll(async () => {
    await app.close();
    await forwarder.stop();
    data.cleanup();
    dir.cleanup();
  });

  // proves: R55, R56
  test('a published plan is applied by the runner and reported with the state it left; a plan file swapped under a reviewed content is refused before terraform apply, nothing destroyed', async () => {
    const runner = startRunner();
    await runner.line(/^runner: subscribed; checking infra$/);

    await plan('one.tfplan', '1');
    const one = await submit('one.tfplan');
    expect(await approve(one.id)).toMatchObject({ status: 'PUBLISHED' });
    await runner.line(new RegExp(`^runner: ${one.id} published$`));
    await runner.line(new RegExp(`^runner: ${one.id} started infra#1 \\(sequence 1\\) in `));
    await runner.line(
      new RegExp(`^runner: ${one.id} verified: the plan file is the reviewed plan$`),
    );
    const done = await runner.line(new RegExp(`^runner: ${one.id} applied, `));
    expect(done).toBe(
      `runner: ${one.id} applied, SUCCEEDED (infra#1), state serial ${state().serial}`,
    );
    expect(appValue()).toBe('app-1');
    expect(await latest()).toMatchObject({
      id: 'infra#1',
      status: 'SUCCEEDED',
      plan: { id: one.id },
    });
    expect(await reportedState()).toEqual({ lineage: state().lineage, serial: state().serial });

    // The reviewer sees two's update; the plan file is a -destroy plan of the same state.
    await plan('two.tfplan', '2');
    await plan('destroy.tfplan', '2', 0, '-destroy');
    const before = stateFile();
    const swapped = await submit('destroy.tfplan', 'two.tfplan');
    expect(swapped.summary).toMatchObject({ destroy: 0, change: 1 });
    const from = runner.lines.length;
    await approve(swapped.id);
    const refused = await runner.line(new RegExp(`^runner: ${swapped.id} refused`), from);
    expect(refused).toMatch(
      new RegExp(
        `^runner: ${swapped.id} refused, infra#2 FAILED: the plan file is not the reviewed plan: .*terraform_data\\.app.*; terraform apply did not run$`,
      ),
    );
    expect(runner.lines.slice(from).join('\n')).not.toContain('applying');
    expect(stateFile()).toBe(before);
    expect(appValue()).toBe('app-1');
    const failed = await latest();
    expect(failed).toMatchObject({ id: 'infra#2', status: 'FAILED', plan: { id: swapped.id } });
    expect(failed.detail).toMatch(/^the plan file is not the reviewed plan: /);

    expect(await stopRunner(runner)).toBe(0);
    expect(runner.lines.slice(-2)).toEqual(['runner: SIGTERM: stopping', 'runner: stopped']);
  });

  // proves: R56
  test('two plans from the same state: the runner applies the one published first; the other is refused STATE_SERIAL before terraform runs it, with no deployment sequence anywhere', async () => {
    const runner = startRunner();
    await runner.line(/^runner: subscribed; checking infra$/);
    // Both from the state as it is now; the first takes a few seconds to apply.
    await plan('three.tfplan', '3', 4);
    await plan('four.tfplan', '4');
    const three = await submit('three.tfplan');
    await approve(three.id);
    await runner.line(new RegExp(`^runner: ${three.id} applying$`));
    // Published while three is being applied: its state is still the latest reported.
    const four = await submit('four.tfplan');
    expect(four.basedOnDeploymentSequence).toBeNull();
    const published = await world.gql<{ approvePlan: { status: string } }>(
      tokens.reviewer,
      'mutation($input: ApprovePlanInput!) { approvePlan(input: $input) { status } }',
      { input: { planId: four.id, idempotencyKey: `approve-${four.id}` } },
    );
    await runner.line(new RegExp(`^runner: ${three.id} applied, SUCCEEDED`));
    expect(appValue()).toBe('app-3');
    const after = stateFile();
    if (published.errors) {
      // The service refused to publish it once three's deployment had moved its base.
      expect(published.errors[0].extensions).toMatchObject({
        code: 'PRECONDITION_FAILED',
        reason: 'STATE_SERIAL',
      });
    } else {
      const refused = await runner.line(new RegExp(`^runner: ${four.id} refused at start: `));
      expect(refused).toContain('PRECONDITION_FAILED');
      expect(refused).toContain('reason=STATE_SERIAL');
    }
    expect(runner.lines.join('\n')).not.toContain(`${four.id} started`);
    expect(stateFile()).toBe(after);
    expect((await latest()).plan.id).toBe(three.id);

    // Submitted now, a plan of the old state is refused at once (R57).
    const client = new PlanfenceClient({ url: app.url, token: tokens.agent });
    const lease = await client.acquireLease('infra');
    await expect(
      client.submitTerraformPlan({
        environment: 'infra',
        generation: lease.generation,
        planJson: (await tf('show', '-json', 'four.tfplan')).stdout,
        planFile: readFileSync(join(dir.path, 'four.tfplan')),
      }),
    ).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      extensions: { reason: 'STATE_SERIAL' },
    });
    await client.releaseLease('infra', lease.generation);
  });

  // proves: R28, R55, R56
  test('an AI agent over MCP submits a real plan with its plan file; a reviewer approves; the runner applies it, the state moves and the submit is audited via mcp', async () => {
    const runner = startRunner();
    await runner.line(/^runner: subscribed; checking infra$/);
    await plan('mcp.tfplan', 'mcp');
    // No state yet where this test runs alone.
    const serial = existsSync(join(dir.path, 'terraform.tfstate')) ? state().serial : 0;
    const agent = await connectMcp(app.url, tokens.agent, 'http');
    let planId: string;
    try {
      const { generation } = await agent.ok('acquire_lease', {
        environment: 'infra',
        ttlSeconds: 120,
      });
      const submitted = await agent.ok('submit_plan', {
        environment: 'infra',
        generation,
        title: 'from an agent',
        contentType: 'TERRAFORM_PLAN_JSON',
        content: (await tf('show', '-json', 'mcp.tfplan')).stdout,
        artifact: readFileSync(join(dir.path, 'mcp.tfplan')).toString('base64'),
        sourceRevision: 'mcp-rev',
      });
      const plan = (submitted as { plan: { id: string; status: string; reviewUrl: string } }).plan;
      expect(plan.status).toBe('PROPOSED');
      expect(plan.reviewUrl).toContain(encodeURIComponent(plan.id));
      planId = plan.id;
      await agent.ok('release_lease', { environment: 'infra', generation });
    } finally {
      await agent.close();
    }
    await approve(planId);
    await runner.line(
      new RegExp(`^runner: ${planId} verified: the plan file is the reviewed plan$`),
    );
    await runner.line(new RegExp(`^runner: ${planId} applied, SUCCEEDED`));
    expect(appValue()).toBe('app-mcp');
    expect(state().serial).toBeGreaterThan(serial);
    expect(await latest()).toMatchObject({ status: 'SUCCEEDED', plan: { id: planId } });
    expect(await reportedState()).toEqual({ lineage: state().lineage, serial: state().serial });
    const audit = ok(
      await world.gql<{ auditEvents: { action: string; planId: string | null; via: string }[] }>(
        world.admin,
        '{ auditEvents(environment: "infra", first: 500) { action planId via } }',
      ),
    ).auditEvents;
    expect(audit).toContainEqual({ action: 'SUBMIT_PLAN', planId, via: 'mcp' });
    expect(await stopRunner(runner)).toBe(0);
  });

  test('the runner survives the service going away: a publication made while its socket was down is applied once it is back, and so is one after a restart of the service', async () => {
    const runner = startRunner();
    await runner.line(/^runner: subscribed; checking infra$/);

    // The socket is cut and nothing answers on the port; meanwhile a plan is published.
    forwarder.target = null;
    forwarder.cut();
    await runner.line(/^runner: connection lost/);
    await plan('five.tfplan', '5');
    const five = await submit('five.tfplan');
    await approve(five.id);
    await runner.line(/^runner: reconnecting in/);
    forwarder.target = Number(new URL(app.url).port);
    // Back: the check at reconnect finds five, which no event announced to the runner.
    await runner.line(new RegExp(`^runner: ${five.id} applied, SUCCEEDED`));
    expect(appValue()).toBe('app-5');

    // The service stops and starts again on its database file.
    const from = runner.lines.length;
    forwarder.target = null;
    await app.close();
    await runner.line(/^runner: connection lost/, from);
    await serve();
    await runner.line(/^runner: subscribed; checking infra$/, from);
    await plan('six.tfplan', '6');
    const six = await submit('six.tfplan');
    await approve(six.id);
    await runner.line(new RegExp(`^runner: ${six.id} applied, SUCCEEDED`), from);
    expect(appValue()).toBe('app-6');
    expect(await reportedState()).toEqual({ lineage: state().lineage, serial: state().serial });
    // Each plan was taken once.
    const all = await d.list('infra');
    expect(all.filter((x) => x.plan.id === five.id)).toHaveLength(1);
    expect(all.filter((x) => x.plan.id === six.id)).toHaveLength(1);
  });

  test('a runner started after a publication applies it; a runner started again (from a configuration file) does not apply it twice', async () => {
    await plan('seven.tfplan', '7');
    const seven = await submit('seven.tfplan');
    await approve(seven.id);
    const first = startRunner();
    await first.line(new RegExp(`^runner: ${seven.id} applied, SUCCEEDED`));
    expect(await stopRunner(first)).toBe(0);
    const serial = state().serial;

    // The second from a configuration file, whose directories are relative to it.
    const config = join(data.path, 'runner.yaml');
    writeFileSync(
      config,
      `environments:\n  infra: { chdir: ${relative(data.path, dir.path)} }\nheartbeatSeconds: 5\n`,
    );
    const second = spawnRunner(['--config', config]);
    await second.line(new RegExp(`^runner: watching infra \\(${dir.path}\\) at `));
    await second.line(/^runner: subscribed; checking infra$/);
    // Its check found seven deployed: nothing started. (A later plan shows that it checked.)
    await plan('eight.tfplan', '8');
    const eight = await submit('eight.tfplan');
    await approve(eight.id);
    await second.line(new RegExp(`^runner: ${eight.id} applied, SUCCEEDED`));
    expect(second.lines.join('\n')).not.toContain(`${seven.id} started`);
    expect(state().serial).toBeGreaterThan(serial);
    expect(await stopRunner(second)).toBe(0);
  });

  test('SIGTERM while terraform applies: terraform finishes, the outcome is reported, the runner exits 0; past the grace period terraform is interrupted and FAILED is reported with the state', async () => {
    const runner = startRunner();
    await runner.line(/^runner: subscribed; checking infra$/);
    await plan('nine.tfplan', '9', 4);
    const nine = await submit('nine.tfplan');
    await approve(nine.id);
    await runner.line(new RegExp(`^runner: ${nine.id} applying$`));
    runner.child.kill('SIGTERM');
    expect(await runner.exited).toBe(0);
    const log = runner.lines.join('\n');
    expect(log).toMatch(
      /runner: SIGTERM: stopping once infra#\d+ \(infra@[\d.]+\) is reported; terraform has 300 s to finish/,
    );
    expect(log).toContain(`runner: ${nine.id} applied, SUCCEEDED`);
    expect(runner.lines.at(-1)).toBe('runner: stopped');
    expect(await latest()).toMatchObject({ status: 'SUCCEEDED', plan: { id: nine.id } });
    expect(appValue()).toBe('app-9');

    // A grace period of 1 s for an apply of 30 s: terraform is interrupted, FAILED reported.
    const impatient = startRunner('--grace', '1');
    await impatient.line(/^runner: subscribed; checking infra$/);
    await plan('ten.tfplan', '10', 30);
    const ten = await submit('ten.tfplan');
    await approve(ten.id);
    await impatient.line(new RegExp(`^runner: ${ten.id} applying$`));
    impatient.child.kill('SIGTERM');
    expect(await impatient.exited).toBe(0);
    const lines = impatient.lines.join('\n');
    expect(lines).toMatch(/runner: grace period over: interrupting terraform for infra#\d+/);
    expect(lines).toMatch(
      new RegExp(
        `runner: ${ten.id} applied, FAILED \\(infra#\\d+\\): terraform apply exited with \\d+ \\(interrupted: the runner stopped: grace period over\\), state serial \\d+`,
      ),
    );
    const failed = await latest();
    expect(failed).toMatchObject({ status: 'FAILED', plan: { id: ten.id } });
    expect(await reportedState()).toEqual({ lineage: state().lineage, serial: state().serial });
  });

  test('refusals before anything runs: a token that is not a DEPLOYER’s, an environment that does not exist, bad usage', async () => {
    const agent = await run(process.execPath, [
      BIN,
      'runner',
      'infra',
      '--terraform',
      '--chdir',
      dir.path,
      '--url',
      url,
      '--token',
      tokens.agent,
    ]);
    expect(agent.code).toBe(3);
    expect(agent.stderr).toContain('needs a DEPLOYER token');
    const missing = await run(process.execPath, [
      BIN,
      'runner',
      'nowhere',
      '--terraform',
      '--chdir',
      dir.path,
      '--url',
      url,
      '--token',
      tokens.deployer,
    ]);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('environment "nowhere" does not exist');
    const usage = await run(process.execPath, [BIN, 'runner', 'infra', '--chdir', dir.path]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--terraform');
    const config = join(dir.path, 'runner.yaml');
    writeFileSync(config, 'environments:\n  infra: ./nowhere\n');
    const badDir = await run(process.execPath, [BIN, 'runner', '--config', config, '--token', 'x']);
    expect(badDir.code).toBe(2);
    expect(badDir.stderr).toContain('is not a directory');
  });
});
