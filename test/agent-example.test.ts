/** examples/agent.ts against the real service while another holder has the lease. */
import { jest } from '@jest/globals';
import { runAgent } from '../examples/agent.js';
import { PlanfenceClient } from '../src/client/index.js';
import { startApp, type TestApp } from './support/app.js';
import { ok, World } from './support/world.js';

let app: TestApp;
let world: World;
let agent: PlanfenceClient;
let holder: string;

beforeAll(async () => {
  app = await startApp();
  world = new World(app);
  agent = new PlanfenceClient({ url: app.url, token: await world.issue('example', 'AGENT') });
  holder = await world.issue('holder', 'AGENT');
});
afterAll(() => app.close());
afterEach(() => jest.restoreAllMocks());

/** Waits (on state, not on time) until a lease ticket waits for `environment`. */
async function untilQueued(environment: string): Promise<void> {
  for (;;) {
    const queue = ok(
      await app.gql<{ leaseQueue: unknown[] }>(
        world.admin,
        'query($e: String!) { leaseQueue(environment: $e) { id } }',
        { e: environment },
      ),
    ).leaseQueue;
    if (queue.length) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function lines(spy: jest.SpiedFunction<(...args: unknown[]) => void>): string {
  return spy.mock.calls.map((call) => call.join(' ')).join('\n');
}

test('on LEASE_HELD the agent waits its turn, then submits under the granted generation', async () => {
  await world.createEnvironment('example-wait', 'MONOTONIC');
  const held = ok(await world.acquireRaw(holder, 'example-wait', 600)).acquireLease;
  const errors = jest.spyOn(console, 'error').mockImplementation(() => undefined);
  const logs = jest.spyOn(console, 'log').mockImplementation(() => undefined);

  const running = runAgent(agent, 'example-wait', 600);
  await untilQueued('example-wait');
  ok(
    await app.gql(holder, 'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) }', {
      input: { environment: 'example-wait', generation: held.generation },
    }),
  );
  expect(await running).toBe(0);
  expect(lines(errors)).toContain('example-wait is leased to holder until');
  expect(lines(logs)).toContain(`submitted example-wait@${held.generation + 1}.1 (PROPOSED)`);
});

test('when the wait ends without a grant, the agent says so and exits 6', async () => {
  await world.createEnvironment('example-give-up', 'MONOTONIC');
  ok(await world.acquireRaw(holder, 'example-give-up', 600));
  const errors = jest.spyOn(console, 'error').mockImplementation(() => undefined);

  const running = runAgent(agent, 'example-give-up', 1);
  await untilQueued('example-give-up');
  world.advance(1);
  expect(await running).toBe(6);
  expect(lines(errors)).toMatch(
    /gave up waiting for the lease of example-give-up: .*ended EXPIRED/,
  );
});
