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
 * With HOLD_AT (a step: `acquired` or `built`), it waits after saying that step until the
 * harness writes a line to its stdin: the harness then knows nothing was sent past that
 * point, however slowly it got to freeze the process on a loaded machine.
 *
 *   node agent.js URL TOKEN ENVIRONMENT TTL_SECONDS CONTENT STEP_DELAY_MS [acquire|bound|queue] [HOLD_AT]
 */
import { createHash } from 'node:crypto';

const [url, token, environment, ttl, content, stepDelay, mode, holdAt] = process.argv.slice(2);
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

async function main() {
  const granted = mode === 'queue' ? await waitInQueue() : await acquire();
  if ('code' in granted) return say({ step: 'result', code: granted.code });
  const { generation } = granted;
  await reached('acquired', { generation });
  await pause(Number(stepDelay));

  let basedOnDeploymentSequence: number | undefined;
  if (mode === 'bound') {
    const state = await gql(
      'query($name: String!) { environment(name: $name) { deploymentSequence } }',
      {},
      { name: environment },
    );
    basedOnDeploymentSequence = state.data!.environment.deploymentSequence as number;
  }
  const plan = { content, hash: createHash('sha256').update(content).digest('hex') };
  await reached('built', { generation, hash: plan.hash, basedOnDeploymentSequence });
  await pause(Number(stepDelay));

  say({ step: 'sending', generation });
  const submit = () =>
    gql('mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }', {
      environment,
      generation,
      content: plan.content,
      idempotencyKey: `${environment}-${generation}-${plan.hash.slice(0, 16)}`,
      basedOnDeploymentSequence,
    });
  // After a long pause the service may have closed the idle connection: the send fails
  // without an answer, and is sent again under the same idempotency key (R9).
  const submitted = await submit().catch((error: unknown) => {
    if (error instanceof TypeError) return submit();
    throw error;
  });
  if (submitted.errors) {
    return say({ step: 'result', generation, ...submitted.errors[0].extensions });
  }
  say({ step: 'result', generation, code: 'OK', planId: submitted.data!.submitPlan.id });
}

main().catch((error: unknown) => {
  say({ step: 'result', code: 'AGENT_FAILED', message: String(error) });
  process.exitCode = 1;
});
