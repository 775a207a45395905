/** `planfence deploy ...`: deployments of the published plan (docs/design.md §10), for deployers and reviewers. */
import { NO_TOKEN, tokenFor } from './login-store.js';
import { parseArgs } from 'node:util';
import { PlanfenceClient } from '../../client/client.js';
import { type Deployment, type DeploymentOutcome, Deployments } from '../../client/deployments.js';
import { notFound, UsageError } from '../command.js';
import { APPLY_EXIT } from '../exit-codes.js';
import { applyTerraformPlan, DeploymentNotReported, TerraformApplyFailed } from './terraform.js';

export const DEPLOY_HELP = `Usage: planfence deploy <command> [arguments] [--url URL] [--token TOKEN] [--json]

  deploy start ENV [--plan PLAN_ID] [--heartbeat SECONDS] [--key KEY]
                       start a deployment of the current plan (or of PLAN_ID, which must be current);
                       prints its id and sequence, the token to hand to the system that applies it
  deploy apply ENV --terraform [--chdir DIR] [--heartbeat SECONDS]
                       apply the current plan's Terraform plan file (checked against its sha256),
                       inside a deployment: first checks that the file renders as the reviewed plan
                       (terraform show -json), then terraform apply: SUCCEEDED on exit 0, else FAILED
                       with the tail of terraform's output; reports the state's serial after it
  deploy heartbeat DEPLOYMENT_ID [--heartbeat SECONDS]
  deploy finish DEPLOYMENT_ID --succeeded|--failed [--detail TEXT] [--key KEY]
  deploy reconcile DEPLOYMENT_ID --outcome SUCCEEDED|FAILED --note TEXT   (REVIEWER, ADMIN)
  deploy show DEPLOYMENT_ID
  deploy list ENV [--first N]

Exit codes as for every command (planfence --help, docs/cli.md), among them:
  7  DEPLOYMENT_ACTIVE (another deployment is IN_PROGRESS or UNKNOWN) or
     DEPLOYMENT_NOT_ACTIVE (the deployment ended, was reconciled, or is not yours)
  9  deploy apply: terraform apply failed (the deployment is FAILED, with its output as detail)
  10 deploy apply: the plan file is not the reviewed plan (FAILED; terraform apply did not run)
  11 deploy apply: the outcome could not be reported (the deployment lapses to UNKNOWN: reconcile it)`;

const row = (d: Deployment) => ({
  id: d.id,
  sequence: d.sequence,
  plan: d.plan.id,
  status: d.status,
  startedBy: d.startedBy,
  startedAt: d.startedAt,
  finishedAt: d.finishedAt,
  reconciledBy: d.reconciledBy,
});

/** The deployment in one line, without its detail (terraform's output, printed already). */
const brief = (d: Deployment) => `${d.id} ${d.status} (sequence ${d.sequence}, plan ${d.plan.id})`;

const line = (d: Deployment) =>
  `${d.id} ${d.status} (sequence ${d.sequence}, plan ${d.plan.id}, heartbeat until ${d.heartbeatExpiresAt})` +
  (d.detail ? `: ${d.detail}` : '') +
  (d.reconciledBy ? `; reconciled by ${d.reconciledBy}: ${d.reconcileNote}` : '');

function table(rows: Record<string, string | number | null>[]): string {
  if (!rows.length) return '(none)';
  const text = (v: string | number | null) => (v == null ? '-' : String(v));
  const columns = Object.keys(rows[0]);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => text(r[c]).length)));
  const format = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [
    format(columns.map((c) => c.toUpperCase())),
    ...rows.map((r) => format(columns.map((c) => text(r[c])))),
  ].join('\n');
}

/**
 * Runs one `deploy` command; returns the exit code. Usage mistakes print to stderr and
 * return 2; the service's refusals are thrown to the caller, which maps them by the one
 * table of exit codes (exit-codes.ts) like every other command's.
 */
export async function deploy(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
  err: (text: string) => void = (t) => process.stderr.write(`${t}\n`),
): Promise<number> {
  const usage = (message: string) => {
    err(`planfence: ${message}`);
    return 2;
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
        plan: { type: 'string' },
        heartbeat: { type: 'string' },
        key: { type: 'string' },
        succeeded: { type: 'boolean', default: false },
        failed: { type: 'boolean', default: false },
        detail: { type: 'string' },
        outcome: { type: 'string' },
        note: { type: 'string' },
        first: { type: 'string' },
        terraform: { type: 'boolean', default: false },
        chdir: { type: 'string' },
      },
    });
  } catch (error) {
    return usage((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [verb, target] = positionals;
  if (values.help || !verb) {
    out(DEPLOY_HELP);
    return values.help ? 0 : 2;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const token = tokenFor(url, values.token);
  if (!token) return usage(NO_TOKEN);
  const client = new PlanfenceClient({ url, token });
  const deployments = new Deployments(client);
  const whole = (value: string | undefined) =>
    value === undefined ? undefined : /^\d+$/.test(value) ? Number(value) : NaN;
  const heartbeatSeconds = whole(values.heartbeat);
  if (Number.isNaN(heartbeatSeconds)) return usage('--heartbeat must be a whole number of seconds');
  const print = (value: unknown, human: () => string) =>
    out(values.json ? JSON.stringify(value, null, 2) : human());
  if (!target) return usage(`usage: see planfence deploy --help`);

  switch (verb) {
    case 'start': {
      const planId = values.plan ?? (await client.currentPlan(target))?.id;
      if (!planId) return usage(`nothing is published in ${target}: there is no plan to deploy`);
      const started = await deployments.start(target, planId, {
        heartbeatSeconds,
        idempotencyKey: values.key,
      });
      print(started, () => line(started));
      return 0;
    }
    case 'apply': {
      if (!values.terraform) return usage('deploy apply needs --terraform');
      try {
        // Terraform's output goes to stderr as it comes, once; the deployment's detail keeps
        // its tail, and the line on stdout does not repeat it.
        const { deployment, state } = await applyTerraformPlan(client, deployments, target, {
          chdir: values.chdir,
          heartbeatSeconds,
          echo: (chunk) => process.stderr.write(chunk),
        });
        print(
          deployment,
          () => `${brief(deployment)}${state ? `, state serial ${state.serial}` : ''}`,
        );
        return 0;
      } catch (error) {
        if (error instanceof UsageError) return usage(error.message);
        if (error instanceof DeploymentNotReported) {
          err(`planfence: ${error.message}`);
          return APPLY_EXIT.NOT_REPORTED;
        }
        if (!(error instanceof TerraformApplyFailed)) throw error;
        if (values.json) out(JSON.stringify(error.deployment, null, 2));
        if (error.notReviewed) {
          err(
            `planfence: ${error.deployment.id} FAILED: ${error.message}; terraform apply did not run`,
          );
          return APPLY_EXIT.NOT_REVIEWED;
        }
        // The output was echoed already: one line, without repeating it.
        err(
          `planfence: ${error.deployment.id} FAILED: ${error.message}` +
            `${error.state ? `; state serial ${error.state.serial}` : ''} (planfence deploy show ${error.deployment.id} keeps the output's tail)`,
        );
        return APPLY_EXIT.TERRAFORM_FAILED;
      }
    }
    case 'heartbeat': {
      const beaten = await deployments.heartbeat(target, heartbeatSeconds);
      print(beaten, () => line(beaten));
      return 0;
    }
    case 'finish': {
      if (values.succeeded === values.failed)
        return usage('deploy finish needs exactly one of --succeeded and --failed');
      const outcome: DeploymentOutcome = values.succeeded ? 'SUCCEEDED' : 'FAILED';
      const finished = await deployments.finish(target, outcome, {
        detail: values.detail,
        idempotencyKey: values.key,
      });
      print(finished, () => line(finished));
      return 0;
    }
    case 'reconcile': {
      const outcome = values.outcome?.toUpperCase();
      if (outcome !== 'SUCCEEDED' && outcome !== 'FAILED')
        return usage('deploy reconcile needs --outcome SUCCEEDED|FAILED');
      if (!values.note) return usage('deploy reconcile needs --note TEXT');
      const reconciled = await deployments.reconcile(target, outcome, values.note);
      print(reconciled, () => line(reconciled));
      return 0;
    }
    case 'show': {
      const found = await deployments.get(target);
      if (!found) throw notFound(`deployment ${target} does not exist`);
      print(found, () => line(found));
      return 0;
    }
    case 'list': {
      const first = whole(values.first);
      if (Number.isNaN(first)) return usage('--first must be a whole number');
      const list = await deployments.list(target, { first });
      print(list, () => table(list.map(row)));
      return 0;
    }
    default:
      return usage(`unknown command "deploy ${verb}"; see planfence deploy --help`);
  }
}
