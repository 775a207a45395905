/**
 * Dry runs cannot starve submits of policy workers: parsing and evaluating what
 * dryRunPlanPolicies tries runs on a worker of its own, and a budget counts from when a
 * worker has the job (by the worker's own CPU time where the system tells it), never the
 * time spent waiting for one. Eight parallel dry runs whose expressions take the whole parse
 * budget each leave an AGENT's submit in another environment answered while they run, not
 * after them. Judged by order, which the load of a shared machine does not change; with
 * HOSTILE_STALL_BOUNDS=1 (npm run test:stalls) by time too.
 */
import { STALL_BOUNDS } from './hostile/health.js';
import { startApp, type TestApp } from './support/app.js';
import { codeOf, freshKey, ok, World } from './support/world.js';

/** Before: the submit waited behind the eight dry runs (~10 s, ~200× its idle time). */
const MAX_SLOWDOWN = 20;
/**
 * The dry runs answered when the submit is (each takes its whole second of parse budget,
 * and they share one worker): at most this many. Before, all eight.
 */
const MAX_DRY_RUNS_BEFORE_SUBMIT = 3;

let app: TestApp;
let world: World;
beforeAll(async () => {
  app = await startApp({
    PLANFENCE_POLICY_BUDGET_MS: '1000',
    PLANFENCE_PLAN_POLICY_BUDGET_MS: '3000',
  });
  world = new World(app);
});
afterAll(() => app.close());

test("8 parallel dry runs whose parse takes the whole budget: an AGENT's submit elsewhere is not held up", async () => {
  const agent = await world.issue('agent', 'AGENT');
  const reviewer = await world.issue('reviewer', 'REVIEWER');
  await world.createEnvironment('prod', 'MONOTONIC', false);
  await world.createEnvironment('sandbox', 'MONOTONIC', false);
  ok(
    await world.gql(
      world.admin,
      `mutation($input: UpdateEnvironmentPolicyInput!) { updateEnvironmentPolicy(input: $input) { policyVersion } }`,
      {
        input: {
          environment: 'prod',
          planPolicies: [
            {
              name: 'small',
              expression: 'plan.contentBytes < 100000',
              effect: 'WARN',
              message: 'small',
            },
          ],
        },
      },
    ),
  );
  const generation = await world.acquire(agent, 'prod', 3600);
  const submit = async () => {
    const started = performance.now();
    const result = await world.gql(
      agent,
      'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id } }',
      {
        input: {
          environment: 'prod',
          generation,
          content: `plan ${freshKey()}`,
          idempotencyKey: freshKey(),
        },
      },
    );
    expect(codeOf(result)).toBe('OK');
    return performance.now() - started;
  };
  await submit(); // the workers start
  const alone = [await submit(), await submit(), await submit()].sort((a, b) => a - b)[1];

  // An expression the CEL parser backtracks on for longer than the parse budget (1 s).
  const slow = '('.repeat(200) + '1';
  let dryRunsAnswered = 0;
  const tries = Array.from({ length: 8 }, async () => {
    const answer = await world.gql(
      reviewer,
      `query($p: [PlanPolicyInput!]) { dryRunPlanPolicies(environment: "sandbox", planPolicies: $p, content: "x") { policy } }`,
      { p: [{ name: 'slow', expression: slow, effect: 'WARN', message: 'never' }] },
    );
    dryRunsAnswered++;
    return answer;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const during = await submit();
  const answeredBeforeSubmit = dryRunsAnswered;
  const answers = await Promise.all(tries);
  for (const answer of answers) {
    expect(codeOf(answer)).toBe('BAD_USER_INPUT');
    expect(answer.errors![0].extensions).toMatchObject({ policy: 'slow' });
  }
  if (process.env.HOSTILE_VERBOSE) console.log({ alone, during, answeredBeforeSubmit });
  expect(answeredBeforeSubmit).toBeLessThanOrEqual(MAX_DRY_RUNS_BEFORE_SUBMIT);
  if (STALL_BOUNDS) expect(during / alone).toBeLessThan(MAX_SLOWDOWN);
}, 120_000);
