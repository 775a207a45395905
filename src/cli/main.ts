#!/usr/bin/env node
/**
 * planfence — the command line for operators, reviewers and scripts.
 * Run `planfence --help` for the commands; exit codes are listed there and in the README.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PlanfenceClient, type Plan } from '../client/client.js';
import { PlanfenceError, TransportError } from '../client/errors.js';
import { deploy } from './commands/deploy.js';

const HELP = `planfence — guard the publication of deployment plans

Usage: planfence <command> [arguments] [--url URL] [--token TOKEN] [--json]

  token issue NAME ROLE                 issue a token (ROLE: ADMIN, AGENT, REVIEWER, VIEWER)
  token revoke NAME                     revoke a principal's token
  env create NAME [--mode MONOTONIC|STRICT] [--no-approval]
  env list                              environments with fence, lease and current plan
  env show NAME
  lease acquire ENV [--ttl SECONDS] [--instance LABEL]
  lease renew ENV GENERATION [--ttl SECONDS]
  lease release ENV GENERATION
  plan submit ENV GENERATION --file PATH|- [--title T] [--based-on PLAN_ID] [--key KEY]
  plan approve PLAN_ID [--hash SHA256]
  plan reject PLAN_ID --reason TEXT
  plan show PLAN_ID
  plan list ENV [--status STATUS] [--first N]
  current ENV [--watch [--interval SECONDS]]
  audit ENV [--first N]
  deploy start|heartbeat|finish|reconcile|show|list ...   see planfence deploy --help

Options:
  --url URL       the service (default: $PLANFENCE_URL, else http://127.0.0.1:4000)
  --token TOKEN   bearer token (default: $PLANFENCE_TOKEN)
  --json          print JSON instead of tables
  --help          this text

Exit codes:
  0  success
  2  bad usage or bad input (BAD_USER_INPUT, PAYLOAD_TOO_LARGE)
  3  not authenticated or not allowed (UNAUTHENTICATED, FORBIDDEN, SELF_APPROVAL)
  4  not found, or already exists (NOT_FOUND, ALREADY_EXISTS)
  5  fenced: the generation can no longer write (STALE_GENERATION, UNKNOWN_GENERATION)
  6  lease: held by another, or not held (LEASE_HELD, LEASE_NOT_HELD)
  7  conflict: the plan or pointer moved on (INVALID_PLAN_STATE, PRECONDITION_FAILED,
     IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_IN_PROGRESS)
  8  the service is unreachable or failed (transport errors, INTERNAL)`;

class UsageError extends Error {}

const EXIT: Record<string, number> = {
  BAD_USER_INPUT: 2,
  PAYLOAD_TOO_LARGE: 2,
  UNAUTHENTICATED: 3,
  FORBIDDEN: 3,
  SELF_APPROVAL: 3,
  NOT_FOUND: 4,
  ALREADY_EXISTS: 4,
  STALE_GENERATION: 5,
  UNKNOWN_GENERATION: 5,
  LEASE_HELD: 6,
  LEASE_NOT_HELD: 6,
  INVALID_PLAN_STATE: 7,
  PRECONDITION_FAILED: 7,
  IDEMPOTENCY_KEY_REUSED: 7,
  IDEMPOTENCY_IN_PROGRESS: 7,
  INTERNAL: 8,
};

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return `${value}`;
  return JSON.stringify(value);
}

function table(rows: Record<string, unknown>[]): string {
  if (!rows.length) return '(none)';
  const columns = Object.keys(rows[0]);
  const text = cell;
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => text(r[c]).length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [
    line(columns.map((c) => c.toUpperCase())),
    ...rows.map((r) => line(columns.map((c) => text(r[c])))),
  ].join('\n');
}

const planRow = (p: Plan) => ({
  id: p.id,
  status: p.status,
  title: p.title,
  submittedBy: p.submittedBy,
  reviewedBy: p.reviewedBy,
  submittedAt: p.submittedAt,
});

function integer(value: string | undefined, what: string): number {
  if (value === undefined || !/^\d+$/.test(value))
    throw new UsageError(`${what} must be a whole number (got ${value ?? 'nothing'})`);
  return Number(value);
}

export async function run(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
): Promise<number> {
  if (argv[0] === 'deploy') return deploy(argv.slice(1), out);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      mode: { type: 'string' },
      'no-approval': { type: 'boolean', default: false },
      ttl: { type: 'string' },
      instance: { type: 'string' },
      file: { type: 'string' },
      title: { type: 'string' },
      'based-on': { type: 'string' },
      key: { type: 'string' },
      hash: { type: 'string' },
      reason: { type: 'string' },
      status: { type: 'string' },
      first: { type: 'string' },
      watch: { type: 'boolean', default: false },
      interval: { type: 'string' },
    },
  });
  if (values.help || positionals.length === 0) {
    out(HELP);
    return values.help ? 0 : 2;
  }
  const url = values.url ?? process.env.PLANFENCE_URL ?? 'http://127.0.0.1:4000';
  const token = values.token ?? process.env.PLANFENCE_TOKEN;
  if (!token) throw new UsageError('no token: pass --token or set PLANFENCE_TOKEN');
  const client = new PlanfenceClient({ url, token });
  const print = (value: unknown, human: () => string) =>
    out(values.json ? JSON.stringify(value, null, 2) : human());
  const [group, verb, ...rest] = positionals;
  const need = (n: number, usage: string) => {
    if (rest.length < n) throw new UsageError(`usage: planfence ${usage}`);
  };
  const ttl = values.ttl ? integer(values.ttl, '--ttl') : undefined;

  // `current` and `audit` take the environment where the others take a verb.
  switch (group === 'current' || group === 'audit' ? group : `${group} ${verb ?? ''}`.trim()) {
    case 'token issue': {
      need(2, 'token issue NAME ROLE');
      const issued = await client.issueToken(rest[0], rest[1].toUpperCase() as never);
      print(
        issued,
        () =>
          `issued a ${issued.principal.role} token to ${issued.principal.name} (shown once):\n${issued.token}`,
      );
      return 0;
    }
    case 'token revoke': {
      need(1, 'token revoke NAME');
      const principal = await client.revokeToken(rest[0]);
      print(principal, () => `revoked the token of ${principal.name} at ${principal.revokedAt}`);
      return 0;
    }
    case 'env create': {
      need(1, 'env create NAME [--mode MONOTONIC|STRICT] [--no-approval]');
      const env = await client.createEnvironment({
        name: rest[0],
        mode: (values.mode?.toUpperCase() ?? 'MONOTONIC') as never,
        requireApproval: !values['no-approval'],
      });
      print(
        env,
        () =>
          `created ${env.name} (${env.mode}, ${env.requireApproval ? 'approval required' : 'publishes on submit'})`,
      );
      return 0;
    }
    case 'env list': {
      const envs = await client.environments();
      print(envs, () =>
        table(
          envs.map((e) => ({
            name: e.name,
            mode: e.mode,
            fence: e.fence,
            lastIssued: e.lastIssuedGeneration,
            holder: e.lease?.holder,
            generation: e.lease?.generation,
            expiresAt: e.lease?.expiresAt,
            current: e.currentPlan?.id,
          })),
        ),
      );
      return 0;
    }
    case 'env show': {
      need(1, 'env show NAME');
      const env = await client.environment(rest[0]);
      if (!env)
        throw new PlanfenceError({
          message: `environment "${rest[0]}" does not exist`,
          extensions: { code: 'NOT_FOUND' },
        });
      print(env, () =>
        [
          `environment  ${env.name} (${env.mode}, ${env.requireApproval ? 'approval required' : 'publishes on submit'})`,
          `fence        ${env.fence}   last issued generation ${env.lastIssuedGeneration}`,
          `lease        ${env.lease ? `${env.lease.holder}, generation ${env.lease.generation}, until ${env.lease.expiresAt}` : 'none'}`,
          `current      ${env.currentPlan ? `${env.currentPlan.id} ${env.currentPlan.title ?? ''} by ${env.currentPlan.submittedBy}, approved by ${env.currentPlan.reviewedBy ?? '-'}` : 'none'}`,
        ].join('\n'),
      );
      return 0;
    }
    case 'lease acquire': {
      need(1, 'lease acquire ENV [--ttl SECONDS] [--instance LABEL]');
      const lease = await client.acquireLease(rest[0], {
        ttlSeconds: ttl,
        instance: values.instance,
      });
      print(
        lease,
        () =>
          `generation ${lease.generation} on ${lease.environment} for ${lease.holder}, until ${lease.expiresAt}`,
      );
      return 0;
    }
    case 'lease renew': {
      need(2, 'lease renew ENV GENERATION [--ttl SECONDS]');
      const lease = await client.renewLease(rest[0], integer(rest[1], 'GENERATION'), ttl);
      print(
        lease,
        () =>
          `generation ${lease.generation} on ${lease.environment} renewed until ${lease.expiresAt}`,
      );
      return 0;
    }
    case 'lease release': {
      need(2, 'lease release ENV GENERATION');
      await client.releaseLease(rest[0], integer(rest[1], 'GENERATION'));
      print({ released: true }, () => `released generation ${rest[1]} on ${rest[0]}`);
      return 0;
    }
    case 'plan submit': {
      need(2, 'plan submit ENV GENERATION --file PATH|-');
      if (!values.file)
        throw new UsageError('plan submit needs --file PATH (or --file - for standard input)');
      const content = readFileSync(values.file === '-' ? 0 : values.file, 'utf8');
      const plan = await client.submitPlan({
        environment: rest[0],
        generation: integer(rest[1], 'GENERATION'),
        content,
        title: values.title,
        basedOnPlanId: values['based-on'],
        idempotencyKey: values.key,
      });
      print(plan, () => `${plan.id} ${plan.status} (sha256 ${plan.contentHash})`);
      return 0;
    }
    case 'plan approve': {
      need(1, 'plan approve PLAN_ID [--hash SHA256]');
      const plan = await client.approvePlan(rest[0], { contentHash: values.hash });
      print(plan, () => `${plan.id} ${plan.status}, approved by ${plan.reviewedBy}`);
      return 0;
    }
    case 'plan reject': {
      need(1, 'plan reject PLAN_ID --reason TEXT');
      if (!values.reason) throw new UsageError('plan reject needs --reason TEXT');
      const plan = await client.rejectPlan(rest[0], values.reason);
      print(plan, () => `${plan.id} ${plan.status}: ${plan.rejectionReason}`);
      return 0;
    }
    case 'plan show': {
      need(1, 'plan show PLAN_ID');
      const plan = await client.plan(rest[0]);
      if (!plan)
        throw new PlanfenceError({
          message: `plan ${rest[0]} does not exist`,
          extensions: { code: 'NOT_FOUND' },
        });
      print(plan, () => `${table([planRow(plan)])}\n\n${plan.content}`);
      return 0;
    }
    case 'plan list': {
      need(1, 'plan list ENV [--status STATUS] [--first N]');
      const plans = await client.plans(rest[0], {
        status: values.status?.toUpperCase() as never,
        first: values.first ? integer(values.first, '--first') : undefined,
      });
      print(plans, () => table(plans.map(planRow)));
      return 0;
    }
    case 'audit': {
      if (!verb) throw new UsageError('usage: planfence audit ENV [--first N]');
      const events = await client.auditEvents(verb, {
        first: values.first ? integer(values.first, '--first') : undefined,
      });
      print(events, () =>
        table(
          events.map((e) => ({
            at: e.at,
            actor: e.actor,
            action: e.action,
            generation: e.generation,
            plan: e.planId,
            outcome: e.outcome,
            code: e.code,
          })),
        ),
      );
      return 0;
    }
    case 'current': {
      if (!verb) throw new UsageError('usage: planfence current ENV [--watch]');
      const show = (plan: Plan | null) =>
        print(plan, () =>
          plan
            ? `${plan.id} ${plan.title ?? ''} by ${plan.submittedBy}, published ${plan.publishedAt}`
            : `nothing is published in ${verb}`,
        );
      let last = await client.currentPlan(verb);
      show(last);
      if (!values.watch) return 0;
      const every = values.interval ? integer(values.interval, '--interval') * 1000 : 2000;
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, every));
        const now = await client.currentPlan(verb);
        if (now?.id !== last?.id) show(now);
        last = now;
      }
    }
    default:
      throw new UsageError(`unknown command "${positionals.join(' ')}"; see planfence --help`);
  }
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
      code: EXIT[error.code] ?? 8,
    };
  }
  if (error instanceof TransportError) return { line: error.message, code: 8 };
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
