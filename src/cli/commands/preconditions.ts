/**
 * Preconditions beyond approval (DESIGN §22): `check report` (a CHECKER's result on a plan,
 * R50), `env set` (an environment's required checks, promotion and deploy window, R50–R52)
 * and `drift report|check` (R53; `drift` parses its own arguments: `--terraform` is a flag
 * there).
 */
import { NO_TOKEN, tokenFor } from './login-store.js';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { type CheckStatus, Checks, type EnvironmentPreconditions } from '../../client/checks.js';
import { PlanfenceClient } from '../../client/client.js';
import { type Command, UsageError } from '../command.js';

const STATUSES: readonly CheckStatus[] = ['PENDING', 'SUCCESS', 'FAILURE'];

/** "90", "90m", "2h", "1d" → minutes. */
export function minutes(text: string, option: string): number {
  const match = /^(\d+)([mhd]?)$/.exec(text.trim());
  if (!match) {
    throw new UsageError(`--${option} must be minutes, e.g. 30, 30m, 2h or 1d (not "${text}")`);
  }
  return Number(match[1]) * ({ '': 1, m: 1, h: 60, d: 1440 } as const)[match[2] as '' | 'm'];
}

function describe(env: EnvironmentPreconditions): string {
  return [
    `environment      ${env.name}`,
    `required checks  ${env.requiredChecks.join(', ') || 'none'}`,
    `promotion        ${env.promotion ? `from ${env.promotion.from} after ${env.promotion.soakMinutes} minutes` : 'none'}`,
    `deploy within    ${env.deployWithinMinutes != null ? `${env.deployWithinMinutes} minutes of publication` : 'any time'}`,
    `deployments      sequence ${env.deploymentSequence}${env.driftReportedAt ? `; drift reported ${env.driftReportedAt}` : ''}`,
  ].join('\n');
}

/** planfence check report PLAN_ID NAME --status PENDING|SUCCESS|FAILURE [--summary TEXT] [--details-url URL] */
export const reportCheck: Command = async ({ client, rest, values, print, need }) => {
  const usage =
    'check report PLAN_ID NAME --status PENDING|SUCCESS|FAILURE [--summary TEXT] [--details-url URL]';
  need(2, usage);
  const status = values.status?.toUpperCase() as CheckStatus | undefined;
  if (!status || !STATUSES.includes(status)) throw new UsageError(`usage: planfence ${usage}`);
  const plan = await new Checks(client).report(rest[0], rest[1], status, {
    summary: values.summary,
    detailsUrl: values['details-url'],
  });
  print(plan, () => {
    const pending = plan.pendingChecks.length
      ? `; waiting for ${plan.pendingChecks.join(', ')}`
      : '';
    return `${rest[1]} ${status} on ${plan.id}: the plan is ${plan.status}${plan.status === 'PROPOSED' ? pending : ''}`;
  });
  return 0;
};

/**
 * planfence env set ENV [--required-checks A,B|none] [--promote-from ENV|none] [--soak DURATION]
 * [--deploy-within DURATION|none]
 */
export const setEnvironment: Command = async ({ client, rest, values, print, need }) => {
  need(
    1,
    'env set ENV [--required-checks A,B|none] [--promote-from ENV|none] [--soak 60m] [--deploy-within 30m|none]',
  );
  const checks = new Checks(client);
  const required = values['required-checks'];
  const from = values['promote-from'];
  const soak = values.soak;
  const within = values['deploy-within'];
  if (soak !== undefined && (from === undefined || from === 'none')) {
    throw new UsageError('--soak goes with --promote-from ENV');
  }
  const settings: Parameters<Checks['configure']>[1] = {};
  if (required !== undefined) {
    settings.requiredChecks =
      required === 'none' || required === ''
        ? []
        : required
            .split(',')
            .map((name) => name.trim())
            .filter(Boolean);
  }
  if (from !== undefined) {
    settings.promotion =
      from === 'none' ? null : { from, soakMinutes: soak ? minutes(soak, 'soak') : 0 };
  }
  if (within !== undefined) {
    settings.deployWithinMinutes = within === 'none' ? null : minutes(within, 'deploy-within');
  }
  const env = Object.keys(settings).length
    ? await checks.configure(rest[0], settings)
    : await checks.preconditions(rest[0]);
  if (!env) throw new UsageError(`environment "${rest[0]}" does not exist`);
  print(env, () => describe(env));
  return 0;
};

export const DRIFT_HELP = `Usage: planfence drift <command> [arguments] [--url URL] [--token TOKEN] [--json]

  drift report ENV --detail TEXT
                       report drift seen in ENV (DEPLOYER, CHECKER): its deployment sequence moves
                       on, so every plan made against an earlier one is stale; proposals made
                       against one turn OBSOLETE (DESIGN R53)
  drift check ENV --terraform [--chdir DIR]
                       run terraform plan -refresh-only -detailed-exitcode in DIR: on exit 2 (the
                       real infrastructure differs from the state) report drift with what changed;
                       on exit 0 report nothing

Exit codes as for every command (planfence --help, docs/cli.md), among them:
  9  drift check: terraform plan failed (nothing reported)`;

/** Runs terraform plan -refresh-only -detailed-exitcode in `chdir`. */
function refreshOnlyPlan(
  chdir: string | undefined,
): Promise<{ code: number | null; output: string }> {
  const bin = process.env.PLANFENCE_TERRAFORM_BIN || 'terraform';
  const argv = [
    ...(chdir ? [`-chdir=${chdir}`] : []),
    'plan',
    '-refresh-only',
    '-detailed-exitcode',
    '-input=false',
    '-no-color',
    '-lock=false',
  ];
  return new Promise((done, fail) => {
    const child = spawn(bin, argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TF_IN_AUTOMATION: '1', TF_INPUT: '0' },
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', (error) =>
      fail(
        (error as NodeJS.ErrnoException).code === 'ENOENT'
          ? new UsageError(`${bin} was not found on PATH`)
          : error,
      ),
    );
    child.on('close', (code) => done({ code, output }));
  });
}

/**
 * What changed, from terraform's refresh-only plan: the lines that name a changed object or
 * output, at most 1,024 characters in all (the service's limit for a detail).
 */
export function driftDetail(output: string): string {
  const lines = output
    .split('\n')
    .map((line) => line.trim())
    .filter(
      (line) =>
        /has changed|changed outside|has been deleted|has been removed|Changes to Outputs|^[~+-] \w/.test(
          line,
        ) || /^# /.test(line),
    );
  const text = `terraform plan -refresh-only found drift: ${lines.join('; ') || 'changes outside Terraform'}`;
  return text.length > 1024 ? `${text.slice(0, 1021)}...` : text;
}

/** `planfence drift ...` */
export async function drift(argv: string[], out: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      detail: { type: 'string' },
      terraform: { type: 'boolean', default: false },
      chdir: { type: 'string' },
    },
  });
  const [verb, environment] = positionals;
  if (values.help || !verb) {
    out(DRIFT_HELP);
    return values.help ? 0 : 2;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const token = tokenFor(url, values.token);
  if (!token) throw new UsageError(NO_TOKEN);
  const checks = new Checks(new PlanfenceClient({ url, token }));
  const print = (env: EnvironmentPreconditions, line: string) =>
    out(values.json ? JSON.stringify(env, null, 2) : line);
  if (verb === 'report') {
    if (!environment || !values.detail) {
      throw new UsageError('usage: planfence drift report ENV --detail TEXT');
    }
    const env = await checks.reportDrift(environment, values.detail);
    print(env, `drift reported in ${env.name}: deployment sequence ${env.deploymentSequence}`);
    return 0;
  }
  if (verb === 'check') {
    if (!environment || !values.terraform) {
      throw new UsageError('usage: planfence drift check ENV --terraform [--chdir DIR]');
    }
    const { code, output } = await refreshOnlyPlan(values.chdir);
    if (code === 0) {
      out(values.json ? JSON.stringify({ drift: false }) : `no drift in ${environment}`);
      return 0;
    }
    if (code !== 2) {
      process.stderr.write(output);
      process.stderr.write(
        `planfence: terraform plan -refresh-only failed (exit ${code}): nothing reported\n`,
      );
      return 9;
    }
    const detail = driftDetail(output);
    const env = await checks.reportDrift(environment, detail);
    print(
      env,
      `drift reported in ${env.name}: deployment sequence ${env.deploymentSequence}\n${detail}`,
    );
    return 0;
  }
  throw new UsageError(`unknown command "drift ${verb}"; see planfence drift --help`);
}
