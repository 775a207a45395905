/**
 * A real CHECKER process for the pause harness (DESIGN R50): it reads a plan, as a scanner
 * does before it judges it, says `read` on stdout (one JSON line), waits for the harness's
 * go-ahead on stdin (the harness freezes it there with SIGSTOP and thaws it later), then
 * reports SUCCESS of its check on the plan it read, and says `result` with the answer's code
 * (and the plan's status, or the refusal's).
 *
 *   node checker.js URL TOKEN PLAN_ID CHECK_NAME
 */
const [url, token, planId, name] = process.argv.slice(2);
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const goAhead = new Promise<void>((resolve) => {
  process.stdin.once('data', () => {
    process.stdin.pause();
    resolve();
  });
});

async function gql(query: string, variables: Record<string, unknown>) {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as {
    data?: Record<string, { id: string; status: string; contentHash?: string }> | null;
    errors?: { message: string; extensions?: { code?: string; status?: string } }[];
  };
}

async function main(): Promise<void> {
  const read = await gql('query($id: ID!) { plan(id: $id) { id status contentHash } }', {
    id: planId,
  });
  const plan = read.data?.plan;
  say({ step: 'read', planId: plan?.id, status: plan?.status });
  await goAhead;
  const answer = await gql(
    'mutation($input: ReportCheckInput!) { reportCheck(input: $input) { id status } }',
    { input: { planId, name, status: 'SUCCESS', summary: `scanned ${plan?.contentHash}` } },
  );
  const error = answer.errors?.[0];
  say({
    step: 'result',
    code: error ? (error.extensions?.code ?? 'UNKNOWN') : 'OK',
    planId,
    status: error ? error.extensions?.status : answer.data?.reportCheck.status,
    message: error?.message,
  });
}

main().catch((error: unknown) => {
  say({ step: 'result', code: `CHECKER_FAILED: ${String(error)}` });
  process.exitCode = 1;
});
