/**
 * The commands of `planfence` and its help text: main.ts runs them. MUTATIONS says which
 * operations of the contract each command runs (test/cli-coverage.test.ts holds it to the schema).
 */
import { type Command } from './command.js';
import { createEnvironment, listEnvironments, showEnvironment } from './commands/environments.js';
import {
  acquireLease,
  cancelLeaseTicket,
  releaseLease,
  renewLease,
  waitForLease,
} from './commands/leases.js';
import { approvePlan, listPlans, rejectPlan, showPlan, submitPlan } from './commands/plans.js';
import {
  environmentPolicy,
  freezeEnvironment,
  reviewQueue,
  testPolicies,
  unfreezeEnvironment,
} from './commands/policies.js';
import { audit, current } from './commands/reads.js';
import { endSession, listSessions } from './commands/login-sessions.js';
import { reportCheck, setEnvironment } from './commands/preconditions.js';
import {
  issueToken,
  listTokens,
  revokeToken,
  rotateToken,
  setTokenGroups,
} from './commands/tokens.js';
import {
  createWebhook,
  deleteWebhook,
  listWebhooks,
  redeliverWebhook,
  webhookDeliveries,
} from './commands/webhooks.js';

export const HELP = `planfence — guard the publication of deployment plans

Usage: planfence <command> [arguments] [--url URL] [--token TOKEN] [--json]

  token issue NAME ROLE [--group G ...] [--environments PATTERN,...] [--expires-in SECONDS]
                                        issue a token (ROLE: ADMIN, AGENT, REVIEWER, VIEWER, DEPLOYER, CHECKER),
                                        limited to environments matching the patterns, expiring
  token rotate NAME                     a new token for the principal; the old one stops at once
  token list                            principals with role, groups, environments, expiry, revocation
  token groups NAME [--group G ...]     replace a principal's groups
  token revoke NAME                     revoke a principal's token
  env create NAME [--mode MONOTONIC|STRICT] [--no-approval]
  env list                              environments with fence, lease and current plan
  env show NAME
  env policy ENV [--rule GROUP:COUNT ...] [--ttl SECONDS|none] [--policy-file PATH]
                                        show or set approval rules (GROUP * = anyone), proposal TTL
                                        and plan policies (a YAML list, docs/policies.md)
  policy test ENV --file PATH [--policy-file PATH] [--content-type TEXT|TERRAFORM_PLAN_JSON]
                                        what the policies decide for a plan (.json: Terraform); stores nothing
  env set ENV [--required-checks A,B|none] [--promote-from ENV|none] [--soak 60m] [--deploy-within 30m|none]
                                        show or set the checks whose SUCCESS publication needs, the
                                        environment a plan must have succeeded in first (and how long
                                        ago), the window in which a published plan must start deploying
  env freeze ENV --reason TEXT          nothing is published until unfreeze (but by break-glass)
  env unfreeze ENV
  lease acquire ENV [--ttl SECONDS] [--instance LABEL]
  lease renew ENV GENERATION [--ttl SECONDS]
  lease release ENV GENERATION
  lease wait ENV [--ttl SECONDS] [--instance LABEL] [--max-wait SECONDS]
                                        wait in the lease queue; prints the generation when granted
  lease cancel TICKET_ID                a lease ticket stops waiting
  plan submit ENV GENERATION --file PATH|- [--title T] [--based-on PLAN_ID] [--key KEY]
  plan submit ENV --terraform PLANFILE [--chdir DIR] [--generation G] [--deployment-sequence N]
              [--source-revision REV] [--title T] [--key KEY]
                                        submit \`terraform show -json PLANFILE\` with the plan file,
                                        under generation G or a lease the command takes; the plan
                                        is bound to the state the file was planned from (and to
                                        deployment sequence N, when given)
  plan approve PLAN_ID [--hash SHA256] [--break-glass REASON]
  plan queue [--first N]                plans you may approve now, oldest first
  plan reject PLAN_ID --reason TEXT
  plan show PLAN_ID [--artifact]        the plan and its review; --json: every field of the plan,
                                        the plan file with --artifact (DEPLOYER, ADMIN)
  plan list ENV [--status STATUS] [--first N]
  check report PLAN_ID NAME --status PENDING|SUCCESS|FAILURE [--summary TEXT] [--details-url URL]
                                        a check's result on a plan (CHECKER); the SUCCESS that completes
                                        what publication needs publishes it
  drift report ENV --detail TEXT        drift seen in ENV: plans made before it are stale (DEPLOYER, CHECKER)
  drift check ENV --terraform [--chdir DIR]
                                        terraform plan -refresh-only; reports drift when it finds some
  login [--provider N] [--no-browser]   a person signs in with the browser; the session's token is stored (0600)
  logout (or login --logout)            ends the stored session and forgets its token
  session list [PRINCIPAL] [--first N]  people's open sessions (ADMIN)
  session end SESSION_ID                ends a session at once (ADMIN)
  current ENV [--watch [--interval SECONDS]]
  audit ENV [--first N]
  webhook create URL --event EVENT ... [--environments PATTERN,...] [--format JSON|SLACK] [--batch-size N]
                                        prints the signing secret once (docs/webhooks.md)
  webhook list
  webhook delete WEBHOOK_ID
  webhook deliveries WEBHOOK_ID [--status PENDING|DELIVERED|FAILED] [--first N]
  webhook redeliver DELIVERY_ID         send a delivery again
  deploy start|apply|heartbeat|finish|reconcile|show|list ...   see planfence deploy --help
  login --oidc-token-file PATH | --github-actions   a short-lived token for a CI job (planfence login --help)
  mcp                                   the agent tools over MCP on stdio (planfence mcp --help, docs/mcp.md)
  runner ENV... --terraform --chdir DIR | --config FILE   the DEPLOYER process: applies each published
                                        Terraform plan of the environments (planfence runner --help, docs/runner.md)

Options:
  --url URL       the service (default: $PLANFENCE_URL, else http://127.0.0.1:4000)
  --token TOKEN   bearer token (default: $PLANFENCE_TOKEN)
  --json          print JSON instead of tables
  --help          this text
  --version       the version of this command line

Exit codes (the same for every command, docs/cli.md):
  0  success
  2  bad usage or bad input (BAD_USER_INPUT, PAYLOAD_TOO_LARGE)
  3  not authenticated or not allowed (UNAUTHENTICATED, FORBIDDEN, SELF_APPROVAL,
     ALREADY_APPROVED)
  4  not found, or already exists (NOT_FOUND, ALREADY_EXISTS)
  5  fenced: the generation can no longer write (STALE_GENERATION, UNKNOWN_GENERATION)
  6  lease: held by another, or not held (LEASE_HELD, LEASE_NOT_HELD, QUEUE_FULL,
     GENERATIONS_EXHAUSTED), or a queue ticket ended without a grant (EXPIRED, SUPERSEDED,
     CANCELLED)
  7  conflict: the plan, pointer or deployment moved on (INVALID_PLAN_STATE, PRECONDITION_FAILED,
     IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_IN_PROGRESS, FROZEN, DEPLOYMENT_ACTIVE,
     DEPLOYMENT_NOT_ACTIVE, CURSOR_TOO_OLD)
  8  the service is unreachable, failed or cannot take the call now (transport errors,
     INTERNAL, STORAGE_UNAVAILABLE, RATE_LIMITED once the client's retries are spent)
  9  a plan policy refuses the plan (POLICY_DENIED; policy test: a policy would), or
     deploy apply: terraform apply failed
  10 deploy apply: the plan file is not the reviewed plan (the deployment is FAILED; terraform
     apply did not run)
  11 deploy apply, runner: an outcome could not be reported (the deployment reads UNKNOWN once
     its heartbeat lapses: reconcile it)`;

/** The commands, by their first two words (`current` and `audit` by their first). */
export const COMMANDS: Record<string, Command> = {
  'token issue': issueToken,
  'token revoke': revokeToken,
  'token rotate': rotateToken,
  'token list': listTokens,
  'token groups': setTokenGroups,
  'env create': createEnvironment,
  'env list': listEnvironments,
  'env show': showEnvironment,
  'env policy': environmentPolicy,
  'env set': setEnvironment,
  'env freeze': freezeEnvironment,
  'env unfreeze': unfreezeEnvironment,
  'lease acquire': acquireLease,
  'lease renew': renewLease,
  'lease release': releaseLease,
  'lease wait': waitForLease,
  'lease cancel': cancelLeaseTicket,
  'plan submit': submitPlan,
  'plan approve': approvePlan,
  'plan reject': rejectPlan,
  'plan show': showPlan,
  'plan list': listPlans,
  'plan queue': reviewQueue,
  'check report': reportCheck,
  'policy test': testPolicies,
  'webhook create': createWebhook,
  'webhook list': listWebhooks,
  'webhook delete': deleteWebhook,
  'webhook deliveries': webhookDeliveries,
  'webhook redeliver': redeliverWebhook,
  'session list': listSessions,
  'session end': endSession,
  current,
  audit,
};

/**
 * The contract's mutations each command runs (`deploy ...`, `login`, `mcp` and `runner` parse
 * their own arguments). A mutation no command runs is listed in NOT_A_COMMAND with the reason.
 */
export const MUTATIONS: Record<string, string[]> = {
  'token issue': ['issueToken'],
  'token revoke': ['revokeToken'],
  'token rotate': ['rotateToken'],
  'token groups': ['setPrincipalGroups'],
  login: ['exchangeOidcToken'],
  logout: ['logout'],
  'session end': ['endSession'],
  'env create': ['createEnvironment'],
  'env policy': ['updateEnvironmentPolicy'],
  'env set': ['updateEnvironmentPolicy'],
  'env freeze': ['freezeEnvironment'],
  'env unfreeze': ['unfreezeEnvironment'],
  'lease acquire': ['acquireLease'],
  'lease renew': ['renewLease'],
  'lease release': ['releaseLease'],
  'lease wait': ['enqueueLease'],
  'lease cancel': ['cancelLeaseTicket'],
  'plan submit': ['submitPlan'],
  'plan approve': ['approvePlan'],
  'plan reject': ['rejectPlan'],
  'check report': ['reportCheck'],
  'drift report': ['reportDrift'],
  'drift check': ['reportDrift'],
  'deploy start': ['startDeployment'],
  'deploy apply': ['startDeployment', 'heartbeatDeployment', 'finishDeployment'],
  runner: ['startDeployment', 'heartbeatDeployment', 'finishDeployment'],
  'deploy heartbeat': ['heartbeatDeployment'],
  'deploy finish': ['finishDeployment'],
  'deploy reconcile': ['reconcileDeployment'],
  'webhook create': ['createWebhook'],
  'webhook delete': ['deleteWebhook'],
  'webhook redeliver': ['redeliverWebhook'],
};

/** Mutations deliberately without a command of their own, and why. */
export const NOT_A_COMMAND: Record<string, string> = {
  linkSlack:
    'a person opens the one-time link /planfence link shows them in Slack in the console, signed in (docs/slack.md)',
  unlinkSlack: 'done in the console by the linked person or an ADMIN (docs/slack.md)',
};

/** The words of the commands that parse their own arguments. */
export const OWN_PARSERS = ['deploy', 'login', 'logout', 'mcp', 'runner', 'drift'] as const;
