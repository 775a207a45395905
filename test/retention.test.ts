/** Retention with the service clock: old content of every plan but the published one goes; nothing recent. */
import { DataSource } from 'typeorm';
import { RetentionService } from '../src/retention/retention.service.js';
import { startApp, type TestApp } from './support/app.js';
import { codeOf, ok, World } from './support/world.js';

let app: TestApp;
let world: World;

beforeAll(async () => {
  app = await startApp({
    PLANFENCE_PLAN_RETENTION_DAYS: '30',
    PLANFENCE_IDEMPOTENCY_TTL_HOURS: '24',
  });
  world = new World(app);
});
afterAll(() => app.close());

const purgedFields = 'id status content contentHash purgedAt';

test('purges old superseded, obsolete, rejected and proposed content and expired keys; keeps the rest', async () => {
  const agent = await world.issue('agent', 'AGENT');
  const reviewer = await world.issue('reviewer', 'REVIEWER');
  await world.createEnvironment('prod', 'MONOTONIC');
  const g = await world.acquire(agent, 'prod', 3600);
  const superseded = await world.submitOk(agent, 'prod', g, 'old published');
  ok(await world.approve(reviewer, superseded.id));
  const rejected = await world.submitOk(agent, 'prod', g, 'old rejected');
  ok(await world.reject(reviewer, rejected.id, 'no'));
  const obsolete = await world.submitOk(agent, 'prod', g, 'old passed over');
  const published = await world.submitOk(agent, 'prod', g, 'old but current');
  ok(await world.approve(reviewer, published.id));
  const proposed = await world.submitOk(agent, 'prod', g, 'old but still proposed');

  world.advance(31 * 86400);
  await world.createEnvironment('staging', 'MONOTONIC');
  const g2 = await world.acquire(agent, 'staging', 3600);
  const recent = await world.submitOk(agent, 'staging', g2, 'recent, rejected');
  ok(await world.reject(reviewer, recent.id, 'no'));
  const recentProposal = await world.submitOk(agent, 'staging', g2, 'recent, proposed');
  const db = app.get(DataSource);
  const keysBefore = Number((await db.query('SELECT COUNT(*) AS n FROM idempotency_records'))[0].n);

  const report = await app.get(RetentionService).purge();

  expect(report.planContents).toBe(4);
  expect(report.idempotencyRecords).toBe(keysBefore - 2); // all but the recent submits' keys expired
  const plans = ok(
    await world.gql<{
      plans: {
        id: string;
        status: string;
        content: string;
        contentHash: string;
        purgedAt: string | null;
      }[];
    }>(world.admin, `{ plans(environment: "prod") { ${purgedFields} } }`),
  ).plans;
  const byId = new Map(plans.map((p) => [p.id, p]));
  for (const gone of [superseded, rejected, obsolete, proposed]) {
    expect(byId.get(gone.id)).toMatchObject({ content: '', contentHash: gone.contentHash });
    expect(byId.get(gone.id)!.purgedAt).not.toBeNull();
  }
  expect(byId.get(obsolete.id)!.status).toBe('OBSOLETE');
  expect(byId.get(published.id)).toMatchObject({ content: published.content, purgedAt: null });
  expect(byId.get(proposed.id)!.status).toBe('PROPOSED');
  expect((await world.plan(recent.id))?.content).toBe(recent.content);
  expect((await world.plan(recentProposal.id))?.content).toBe(recentProposal.content);
  expect((await world.environment('prod')).currentPlan?.id).toBe(published.id);
  expect(await app.get(RetentionService).purge()).toEqual({
    idempotencyRecords: 0,
    planContents: 0,
  });
});

// proves: R6
test('a proposal whose content was purged can no longer be published', async () => {
  const agent = await world.issue('agent-2', 'AGENT');
  const reviewer = await world.issue('reviewer-2', 'REVIEWER');
  await world.createEnvironment('qa', 'MONOTONIC');
  const g = await world.acquire(agent, 'qa', 3600);
  const current = await world.submitOk(agent, 'qa', g, 'published long ago');
  ok(await world.approve(reviewer, current.id));
  const waiting = await world.submitOk(agent, 'qa', g, 'waited a month for review');
  const passedOver = await world.submitOk(agent, 'qa', g, 'passed over');
  const next = await world.submitOk(agent, 'qa', g, 'published next');
  ok(await world.approve(reviewer, next.id));
  expect((await world.plan(passedOver.id))?.status).toBe('OBSOLETE');
  const fresh = await world.submitOk(agent, 'qa', g, 'fresh');

  world.advance(31 * 86400);
  const recent = await world.submitOk(agent, 'qa', g, 'recent');
  await app.get(RetentionService).purge();

  for (const gone of [waiting, passedOver, fresh]) {
    expect(await world.plan(gone.id)).toMatchObject({ content: '', contentHash: gone.contentHash });
  }
  const refused = await world.approve(reviewer, fresh.id);
  expect(codeOf(refused)).toBe('INVALID_PLAN_STATE');
  expect(refused.errors![0].message).toContain('purged');
  expect(refused.errors![0].extensions).toEqual({ code: 'INVALID_PLAN_STATE', status: 'PROPOSED' });
  expect((await world.environment('qa')).currentPlan?.id).toBe(next.id);
  // The recent proposal kept its content and is published as usual.
  expect(ok(await world.approve(reviewer, recent.id)).approvePlan).toMatchObject({
    status: 'PUBLISHED',
    content: 'recent',
  });
});
