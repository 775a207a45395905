/**
 * kill -9 of the service in the middle of a deployer's starts and finishes: every
 * acknowledged start survives, and the deployment sequences stay 1, 2, 3, ... with no gap
 * and no reuse across the crashes and restarts.
 */
import { ADMIN_TOKEN, ServiceProcess } from './fault/service.js';
import { scratchDatabase } from './support/app.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `done` holds; fails if the work it waits for ended first. */
async function until(done: () => boolean, work: () => Promise<unknown>): Promise<void> {
  let ended = false;
  void work().finally(() => {
    ended = true;
  });
  while (!done()) {
    if (ended) throw new Error('the work ended before the awaited progress');
    await sleep(5);
  }
}

// proves: R18
test('deployment sequences are strictly +1 across kill -9 and restarts; acknowledged starts survive', async () => {
  const database = await scratchDatabase(true);
  const service = new ServiceProcess(
    database.url.startsWith('sqlite:') ? database.url.slice('sqlite:'.length) : database.url,
  );
  try {
    await service.start();
    const agent = await service.issueToken('agent', 'AGENT');
    const deployer = await service.issueToken('deployer', 'DEPLOYER');
    await service.ok(
      ADMIN_TOKEN,
      'mutation { createEnvironment(input: { name: "prod", requireApproval: false }) { name } }',
    );
    const { acquireLease } = await service.ok(
      agent,
      'mutation { acquireLease(input: { environment: "prod" }) { generation } }',
    );
    const { submitPlan } = await service.ok(
      agent,
      'mutation($g: Int!) { submitPlan(input: { environment: "prod", generation: $g, idempotencyKey: "p", content: "c" }) { id } }',
      { g: acquireLease.generation },
    );
    const acknowledged: number[] = [];
    let keys = 0;

    for (let crash = 0; crash < 3; crash++) {
      // Finish whatever a crash left IN_PROGRESS, then start and finish as fast as possible until the kill.
      const { deployments: before } = await service.ok(
        ADMIN_TOKEN,
        '{ deployments(environment: "prod", first: 1) { id status } }',
      );
      if (before[0]?.status === 'IN_PROGRESS')
        await service.ok(
          deployer,
          'mutation($id: ID!) { finishDeployment(input: { deploymentId: $id, outcome: FAILED }) { id } }',
          { id: before[0].id },
        );
      let running = true;
      const work = (async () => {
        while (running) {
          try {
            const started = await service.gql(
              deployer,
              'mutation($k: String!, $p: ID!) { startDeployment(input: { environment: "prod", planId: $p, idempotencyKey: $k }) { id sequence } }',
              { k: `k${++keys}`, p: submitPlan.id },
            );
            if (started.errors) throw new Error(JSON.stringify(started.errors));
            acknowledged.push(started.data.startDeployment.sequence);
            await service.gql(
              deployer,
              'mutation($id: ID!) { finishDeployment(input: { deploymentId: $id, outcome: SUCCEEDED }) { id } }',
              { id: started.data.startDeployment.id },
            );
          } catch {
            return; // the service is gone
          }
        }
      })();
      // The kill comes after this round's work has made progress (counted, not waited for).
      const roundStart = acknowledged.length;
      await until(
        () => acknowledged.length >= roundStart + 2,
        () => work,
      );
      await sleep(crash * 7);
      await service.crash();
      running = false;
      await work;
      await service.start();
    }

    const { deployments } = await service.ok(
      ADMIN_TOKEN,
      '{ deployments(environment: "prod", first: 500) { sequence } }',
    );
    const sequences = (deployments as { sequence: number }[]).map((d) => d.sequence).reverse();
    expect(acknowledged.length).toBeGreaterThan(3);
    expect(sequences).toEqual(sequences.map((_, i) => i + 1));
    for (const sequence of acknowledged) expect(sequences).toContain(sequence);
    expect(new Set(acknowledged).size).toBe(acknowledged.length);
  } finally {
    await service.crash();
    await database.cleanup();
  }
}, 120_000);
