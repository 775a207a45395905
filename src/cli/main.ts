#!/usr/bin/env node
/**
 * planfence — the command line for operators, reviewers and scripts.
 * Run `planfence --help` for the commands; exit codes are listed there and in the README.
 * Each command lives in commands/<feature>.ts.
 */
import { parseArgs } from 'node:util';
import { LeaseNotGrantedError, PlanfenceClient } from '../client/client.js';
import { PlanfenceError, TransportError } from '../client/errors.js';
import { type Command, OPTIONS, UsageError } from './command.js';
import { exitCodeOf } from './exit-codes.js';
import { createEnvironment, listEnvironments, showEnvironment } from './commands/environments.js';
import { acquireLease, releaseLease, renewLease, waitForLease } from './commands/leases.js';
import { approvePlan, listPlans, rejectPlan, showPlan, submitPlan } from './commands/plans.js';
import {
  environmentPolicy,
  freezeEnvironment,
  reviewQueue,
  testPolicies,
  unfreezeEnvironment,
} from './commands/policies.js';
import { audit, current } from './commands/reads.js';
import { issueToken, revokeToken } from './commands/tokens.js';
import { deploy } from './commands/deploy.js';
import { login } from './commands/login.js';
import { mcp } from './commands/mcp.js';

const HELP = `planfence — guard the publication of deployment plans

Usage: planfence <command> [arguments] [--url URL] [--token TOKEN] [--json]

  token issue NAME ROLE [--group G ...] issue a token (ROLE: ADMIN, AGENT, REVIEWER, VIEWER)
  token revoke NAME                     revoke a principal's token
  env create NAME [--mode MONOTONIC|STRICT] [--no-approval]
  env list                              environments with fence, lease and current plan
  env show NAME
  env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none] [--policy-file PATH]
                                        show or set approval rules (GROUP * = anyone), proposal TTL
                                        and plan policies (a YAML list, docs/policies.md)
  policy test ENV --file PATH [--policy-file PATH] [--content-type TEXT|TERRAFORM_PLAN_JSON]
                                        what the policies decide for a plan (.json: Terraform); stores nothing
  env freeze ENV --reason TEXT          nothing is published until unfreeze (but by break-glass)
  env unfreeze ENV
  lease acquire ENV [--ttl SECONDS] [--instance LABEL]
  lease renew ENV GENERATION [--ttl SECONDS]
  lease release ENV GENERATION
  lease wait ENV [--ttl SECONDS] [--instance LABEL] [--max-wait SECONDS]
                                        wait in the lease queue; prints the generation when granted
  plan submit ENV GENERATION --file PATH|- [--title T] [--based-on PLAN_ID] [--key KEY]
  plan submit ENV --terraform PLANFILE [--chdir DIR] [--generation G] [--deployment-sequence N]
              [--source-revision REV] [--title T] [--key KEY]
                                        submit \`terraform show -json PLANFILE\` with the plan file,
                                        bound to deployment sequence N (default: the current one),
                                        under generation G or a lease the command takes
  plan approve PLAN_ID [--hash SHA256] [--break-glass REASON]
  plan queue [--first N]                plans you may approve now, oldest first
  plan reject PLAN_ID --reason TEXT
  plan show PLAN_ID
  plan list ENV [--status STATUS] [--first N]
  current ENV [--watch [--interval SECONDS]]
  audit ENV [--first N]
  deploy start|apply|heartbeat|finish|reconcile|show|list ...   see planfence deploy --help
  login --oidc-token-file PATH | --github-actions   a short-lived token for a CI job (planfence login --help)
  mcp                                   the agent tools over MCP on stdio (planfence mcp --help, docs/mcp.md)

Options:
  --url URL       the service (default: $PLANFENCE_URL, else http://127.0.0.1:4000)
  --token TOKEN   bearer token (default: $PLANFENCE_TOKEN)
  --json          print JSON instead of tables
  --help          this text

Exit codes:
  0  success
  2  bad usage or bad input (BAD_USER_INPUT, PAYLOAD_TOO_LARGE)
  3  not authenticated or not allowed (UNAUTHENTICATED, FORBIDDEN, SELF_APPROVAL,
     ALREADY_APPROVED)
  4  not found, or already exists (NOT_FOUND, ALREADY_EXISTS)
  5  fenced: the generation can no longer write (STALE_GENERATION, UNKNOWN_GENERATION)
  6  lease: held by another, or not held (LEASE_HELD, LEASE_NOT_HELD, QUEUE_FULL), or a
     queue ticket ended without a grant (EXPIRED, SUPERSEDED, CANCELLED)
  7  conflict: the plan or pointer moved on (INVALID_PLAN_STATE, PRECONDITION_FAILED,
     IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_IN_PROGRESS, FROZEN)
  8  the service is unreachable or failed (transport errors, INTERNAL)
  9  a plan policy refuses the plan (POLICY_DENIED; policy test: a policy would)`;

/** The commands, by their first two words (`current` and `audit` by their first). */
const COMMANDS: Record<string, Command> = {
  'token issue': issueToken,
  'token revoke': revokeToken,
  'env create': createEnvironment,
  'env list': listEnvironments,
  'env show': showEnvironment,
  'env policy': environmentPolicy,
  'env freeze': freezeEnvironment,
  'env unfreeze': unfreezeEnvironment,
  'lease acquire': acquireLease,
  'lease renew': renewLease,
  'lease release': releaseLease,
  'lease wait': waitForLease,
  'plan submit': submitPlan,
  'plan approve': approvePlan,
  'plan reject': rejectPlan,
  'plan show': showPlan,
  'plan list': listPlans,
  'plan queue': reviewQueue,
  'policy test': testPolicies,
  current,
  audit,
};

export async function run(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
): Promise<number> {
  if (argv[0] === 'deploy') return deploy(argv.slice(1), out);
  if (argv[0] === 'login') return login(argv.slice(1), out);
  if (argv[0] === 'mcp') return mcp(argv.slice(1));
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: OPTIONS,
  });
  if (values.help || positionals.length === 0) {
    out(HELP);
    return values.help ? 0 : 2;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const token = values.token ?? process.env.PLANFENCE_TOKEN;
  if (!token) throw new UsageError('no token: pass --token or set PLANFENCE_TOKEN');
  const [group, verb, ...rest] = positionals;
  const command =
    COMMANDS[group === 'current' || group === 'audit' ? group : `${group} ${verb ?? ''}`.trim()];
  if (!command)
    throw new UsageError(`unknown command "${positionals.join(' ')}"; see planfence --help`);
  return command({
    client: new PlanfenceClient({ url, token }),
    verb,
    rest,
    values,
    out,
    print: (value, human) => out(values.json ? JSON.stringify(value, null, 2) : human()),
    need: (n, usage) => {
      if (rest.length < n) throw new UsageError(`usage: planfence ${usage}`);
    },
  });
}

/** One readable line and an exit code that scripts can branch on. */
export function describeFailure(error: unknown): { line: string; code: number } {
  if (error instanceof UsageError) return { line: error.message, code: 2 };
  if (error instanceof PlanfenceError) {
    const details = Object.entries(error.extensions)
      .filter(([k]) => k !== 'code')
      .map(
        ([k, v]) =>
          `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v as string | number)}`,
      );
    return {
      line: `${error.code}: ${error.message}${details.length ? ` (${details.join(', ')})` : ''}`,
      code: exitCodeOf(error.code),
    };
  }
  if (error instanceof TransportError) return { line: error.message, code: 8 };
  if (error instanceof LeaseNotGrantedError) return { line: error.message, code: 6 };
  if (
    error instanceof Error &&
    'code' in error &&
    String((error as { code: unknown }).code).startsWith('ERR_PARSE_ARGS')
  )
    return { line: error.message, code: 2 };
  return {
    line: `unexpected failure: ${error instanceof Error ? error.message : String(error)}`,
    code: 8,
  };
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const { line, code } = describeFailure(error);
    process.stderr.write(`planfence: ${line}\n`);
    process.exitCode = code;
  },
);
