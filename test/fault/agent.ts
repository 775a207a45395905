/**
 * A real agent process for the fault harnesses. It does what an agent does, on its
 * own clock: acquire a lease, build a plan (which takes a moment), send it. It says
 * what it is doing on stdout, one JSON line per step, so that the harness can freeze
 * it (SIGSTOP) at a chosen point and thaw it (SIGCONT) later. It keeps its generation
 * in memory across the pause, as a real agent would. With `bound`, it reads the
 * environment's deployment sequence while it builds its plan and submits the plan as made
 * against it (R33), as `planfence plan submit --terraform` does.
 *
 * With `queue`, it waits its turn in the environment's lease queue instead of acquiring:
 * it says `enqueued` (with its ticket), then `acquired` as soon as it reads the grant.
 *
 * With `terraform` (or `terraform-bound`), it plans with the real terraform in TERRAFORM_DIR
 * (`terraform plan -out` as CONTENT, the value of the configuration's `who`, then `terraform
 * show -json`), says `built`, and only then takes its lease and submits the plan file with its
 * JSON (R56), as an agent that plans before it submits does; `terraform-bound` also reads the
 * deployment sequence before planning and submits against it (R33).
 *
 * With HOLD_AT (a step: `acquired` or `built`; `-` for none), it waits after saying that step
 * until the harness writes a line to its stdin: the harness then knows nothing was sent past
 * that point, however slowly it got to freeze the process on a loaded machine.
 *
 *   node agent.js URL TOKEN ENVIRONMENT TTL_SECONDS CONTENT STEP_DELAY_MS
 *     [acquire|bound|queue|terraform|terraform-bound] [HOLD_AT|-] [TERRAFORM_DIR]
 */
import { createHash } from 'node:crypto';
import { planAs } from './terraform.js';

const [url, token, environment, ttl, content, stepDelay, mode, holdAtArg, terraformDir] =
  process.argv.slice(2);
const holdAt = holdAtArg === '-' ? undefined : holdAtArg;
const withTerraform = mode === 'terraform' || mode === 'terraform-bound';
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

/** The harness's go-ahead: one line on stdin. */
const goAhead = holdAt
  ? new Promise<void>((resolve) => {
      process.stdin.once('data', () => {
        process.stdin.pause();
        resolve();
      });
    })
  : Promise.resolve();

/** Says `step`; when it is HOLD_AT, waits for the harness's go-ahead. */
async function reached(step: string, event: Record<string, unknown>): Promise<void> {
  say({ step, ...event });
  if (step === holdAt) await goAhead;
}

async function gql(
  query: string,
  input: Record<string, unknown>,
  variables: Record<string, unknown> = { input },
) {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as {
    data: Record<string, Record<string, unknown>> | null;
    errors?: { extensions: Record<string, unknown> }[];
  };
}

/** The generation granted to this agent's ticket, or the code it ended with. */
async function waitInQueue(): Promise<{ generation: number } | { code: string }> {
  const TICKET = 'id status lease { generation }';
  const enqueued = await gql(
    `mutation($input: EnqueueLeaseInput!) { enqueueLease(input: $input) { ${TICKET} } }`,
    { environment, ttlSeconds: Number(ttl), maxWaitSeconds: 300 },
  );
  if (enqueued.errors) return { code: enqueued.errors[0].extensions.code as string };
  let ticket = enqueued.data!.enqueueLease as {
    id: string;
    status: string;
    lease: { generation: number } | null;
  };
  say({ step: 'enqueued', ticket: ticket.id });
  while (ticket.status === 'WAITING') {
    await pause(50);
    const read = await gql(
      `query($id: ID!) { leaseTicket(id: $id) { ${TICKET} } }`,
      {},
      {
        id: ticket.id,
      },
    );
    if (read.errors) return { code: read.errors[0].extensions.code as string };
    ticket = read.data!.leaseTicket as typeof ticket;
  }
  return ticket.lease
    ? { generation: ticket.lease.generation }
    : { code: `TICKET_${ticket.status}` };
}

async function acquire(): Promise<{ generation: number } | { code: string }> {
  const lease = await gql(
    'mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { generation } }',
    {
      environment,
      ttlSeconds: Number(ttl),
    },
  );
  if (lease.errors) return { code: lease.errors[0].extensions.code as string };
  return { generation: lease.data!.acquireLease.generation as number };
}

/** The deployment sequence the environment is at now (R33). */
async function deploymentSequence(): Promise<number> {
  const state = await gql(
    'query($name: String!) { environment(name: $name) { deploymentSequence } }',
    {},
    { name: environment },
  );
  return state.data!.environment.deploymentSequence as number;
}

/** Sends the plan; says its result. */
async function send(
  generation: number,
  plan: { content: string; hash: string; artifact?: string },
  basedOnDeploymentSequence: number | undefined,
): Promise<void> {
  say({ step: 'sending', generation });
  const submit = () =>
    gql('mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }', {
      environment,
      generation,
      content: plan.content,
      idempotencyKey: `${environment}-${generation}-${plan.hash.slice(0, 16)}`,
      basedOnDeploymentSequence,
      ...(plan.artifact !== undefined
        ? { contentType: 'TERRAFORM_PLAN_JSON', artifact: plan.artifact }
        : {}),
    });
  // After a long pause the service may have closed the idle connection: the send fails
  // without an answer, and is sent again under the same idempotency key (R9).
  const submitted = await submit().catch((error: unknown) => {
    if (error instanceof TypeError) return submit();
    throw error;
  });
  say(
    submitted.errors
      ? { step: 'result', generation, ...submitted.errors[0].extensions }
      : { step: 'result', generation, code: 'OK', planId: submitted.data!.submitPlan.id },
  );
}

/** Plans with terraform from the state as it is, then takes a lease and submits the plan file. */
async function planThenSubmit(): Promise<void> {
  const basedOnDeploymentSequence =
    mode === 'terraform-bound' ? await deploymentSequence() : undefined;
  const planned = await planAs(terraformDir, content);
  const plan = { ...planned, hash: createHash('sha256').update(planned.content).digest('hex') };
  await reached('built', {
    hash: plan.hash,
    basedOnDeploymentSequence,
    content: plan.content,
  });
  await pause(Number(stepDelay));
  const granted = await acquire();
  if ('code' in granted) {
    say({ step: 'result', code: granted.code });
    return;
  }
  await reached('acquired', { generation: granted.generation });
  await send(granted.generation, plan, basedOnDeploymentSequence);
}

async function main() {
  if (withTerraform) return planThenSubmit();
  const granted = mode === 'queue' ? await waitInQueue() : await acquire();
  if ('code' in granted) return say({ step: 'result', code: granted.code });
  const { generation } = granted;
  await reached('acquired', { generation });
  await pause(Number(stepDelay));

  const basedOnDeploymentSequence = mode === 'bound' ? await deploymentSequence() : undefined;
  const plan = { content, hash: createHash('sha256').update(content).digest('hex') };
  await reached('built', { generation, hash: plan.hash, basedOnDeploymentSequence });
  await pause(Number(stepDelay));
  await send(generation, plan, basedOnDeploymentSequence);
}

main().catch((error: unknown) => {
  say({ step: 'result', code: 'AGENT_FAILED', message: String(error) });
  process.exitCode = 1;
});
