/**
 * PostgreSQL's submit in one statement (PlanWrites.submitAtOnce) on its own, on a real
 * database, without the service: what it stores and answers when it admits a submit, and
 * that it writes nothing when it does not (a refusal, a remembered call, an admission that
 * expired proposals), leaving those to the guard's statements. test/submit-at-once.test.ts
 * proves the same path through the service.
 *
 * Mutation runs are SQLite-only; there this file runs too when PLANFENCE_TEST_POSTGRES_URL
 * names a server, since this code is PostgreSQL's.
 */
import type { DataSource } from 'typeorm';
import { select } from '../src/database/database.js';
import { submitRecord } from '../src/decisions/submit-at-once.js';
import { DecisionTx } from '../src/fencing/effects.js';
import { EnvironmentWrites } from '../src/fencing/environment-writes.js';
import { LeaseWrites } from '../src/fencing/lease-writes.js';
import { atOnceDeclined, PlanWrites } from '../src/fencing/plan-writes.js';
import { readEnvironment, readPlan } from '../src/fencing/reads.js';
import { idempotentCall } from '../src/idempotency/idempotency.service.js';
import { FencingMode } from '../src/model/environment.entity.js';
import { PlanStatus, type Plan } from '../src/model/plan.entity.js';
import { PolicyEffect, type PolicyResult } from '../src/policies/plan-policy.model.js';
import { scratchDatabase, TEST_DATABASE } from './support/app.js';
import { decideOn, migratedDataSource, submitRequest } from './support/guard-database.js';

const server = process.env.PLANFENCE_TEST_POSTGRES_URL;
const inMutationRun = Boolean((globalThis as { __planfenceInRealm?: boolean }).__planfenceInRealm);
const onPostgres = (inMutationRun ? Boolean(server) : TEST_DATABASE === 'postgres')
  ? describe
  : describe.skip;

const plans = new PlanWrites();

onPostgres('a submit decided by one statement on PostgreSQL', () => {
  let dataSource: DataSource;
  let dropDatabase = () => Promise.resolve();
  /** The generation of each environment's lease, held by `agent`. */
  const generations = new Map<string, number>();

  beforeAll(async () => {
    const database = await scratchDatabase(true, 'postgres');
    dropDatabase = database.cleanup;
    dataSource = await migratedDataSource(database.url);
    // dev publishes at once; prod and stage wait for one approval, and their proposals expire
    // after 60 s.
    for (const [name, requireApproval] of [
      ['dev', false],
      ['prod', true],
      ['stage', true],
    ] as const)
      await inTransaction(1_000, async (tx) => {
        await new EnvironmentWrites().createEnvironment(tx, {
          name,
          mode: FencingMode.MONOTONIC,
          requireApproval,
          approvalRules: requireApproval ? [{ group: null, count: 1 }] : [],
          proposalTtlSeconds: requireApproval ? 60 : null,
          now: 1_000,
        });
        const lease = await new LeaseWrites().grantLease(tx, {
          environment: name,
          principal: 'agent',
          holder: 'agent',
          ttlMs: 3_600_000,
          now: 1_000,
        });
        generations.set(name, lease.generation);
      });
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await dropDatabase();
  });

  /** Runs `body` in a transaction of its own, committed unless it throws (then thrown here). */
  async function inTransaction<T>(now: number, body: (tx: DecisionTx) => Promise<T>): Promise<T> {
    const decided = await decideOn(dataSource, now, body);
    if (decided.error) throw decided.error;
    return decided.result as T;
  }

  type Options = {
    now?: number | null;
    generation?: number;
    key?: string;
    content?: string;
    results?: PolicyResult[];
  };

  /**
   * `agent` submits `content` to `environment` through submitAtOnce, recording what the
   * service's decision runner would (src/decisions/submit-at-once.ts); the stored plan or
   * null, once the transaction committed.
   */
  async function submitAtOnce(environment: string, options: Options = {}): Promise<Plan | null> {
    const content = options.content ?? `plan for ${environment}`;
    const call = options.key
      ? idempotentCall('agent', options.key, 'submitPlan', { environment, content })
      : null;
    return inTransaction(options.now ?? 0, (tx) =>
      plans.submitAtOnce(
        tx.manager,
        {
          ...submitRequest(
            environment,
            'agent',
            options.generation ?? generations.get(environment)!,
            content,
            {
              title: 'the title',
              sourceRevision: 'abc123',
              policy: { version: 0, results: options.results ?? [], denial: null, rules: [] },
            },
          ),
          now: options.now === undefined ? 5_000 : options.now,
          idempotency: call && { principal: call.principal, key: call.key },
        },
        (provisional) =>
          submitRecord(provisional, {
            audit: { environment, actor: 'agent', action: 'submitPlan', via: null },
            call,
            idempotencyTtlMs: 86_400_000,
          }),
      ),
    );
  }

  const plansOf = (environment: string) =>
    select<{ id: string; status: string }>(
      dataSource.manager,
      'SELECT id, status FROM plans WHERE environment = :environment ORDER BY sequence',
      { environment },
    );

  const stored = (id: string) => readPlan(dataSource.manager, id);

  test('an admitted submit answers the plan as stored, published, with its events, audit event and call', async () => {
    const results = [
      {
        policy: 'looks-fine',
        effect: PolicyEffect.WARN,
        matched: false,
        message: null,
        error: null,
      },
    ];
    const plan = await submitAtOnce('dev', { now: 5_000, key: 'dev-1', results });
    expect(plan).not.toBeNull();
    const generation = generations.get('dev')!;
    expect(plan).toMatchObject({
      id: `dev@${generation}.1`,
      environment: 'dev',
      generation,
      sequence: 1,
      status: PlanStatus.PUBLISHED,
      title: 'the title',
      sourceRevision: 'abc123',
      submittedBy: 'agent',
      submittedAt: new Date(5_000),
      publishedAt: new Date(5_000),
      expiresAt: null,
      policyResults: results,
    });
    // What it answers is what it stored.
    const row = await stored(plan!.id);
    for (const field of [
      'id',
      'sequence',
      'status',
      'submittedAt',
      'publishedAt',
      'expiresAt',
      'policyResults',
      'sourceRevision',
    ] as const)
      expect(row[field]).toEqual(plan![field]);
    expect((await readEnvironment(dataSource.manager, 'dev')).currentPlanId).toBe(plan!.id);
    const events = await select<{ type: string; actor: string }>(
      dataSource.manager,
      'SELECT type, actor FROM outbox_events WHERE plan_id = :id ORDER BY id',
      { id: plan!.id },
    );
    expect(events).toEqual([
      { type: 'plan.submitted', actor: 'agent' },
      { type: 'plan.published', actor: 'agent' },
    ]);
    const audit = await select<{ action: string; outcome: string; actor: string }>(
      dataSource.manager,
      'SELECT action, outcome, actor FROM audit_events WHERE plan_id = :id',
      { id: plan!.id },
    );
    expect(audit).toEqual([{ action: 'submitPlan', outcome: 'ACCEPTED', actor: 'agent' }]);
    const calls = await select<{ plan_id: string }>(
      dataSource.manager,
      `SELECT plan_id FROM idempotency_records WHERE principal = 'agent' AND idempotency_key = 'dev-1'`,
    );
    expect(calls).toEqual([{ plan_id: plan!.id }]);
  });

  test('the same call again is remembered: null, and nothing written', async () => {
    const before = await plansOf('dev');
    expect(await submitAtOnce('dev', { key: 'dev-1' })).toBeNull();
    expect(await plansOf('dev')).toEqual(before);
  });

  test('a submit without a key is admitted without a call to remember', async () => {
    const calls = () =>
      select<{ n: string }>(dataSource.manager, 'SELECT COUNT(*) AS n FROM idempotency_records');
    const before = await calls();
    const plan = await submitAtOnce('dev', { content: 'keyless' });
    expect(plan).toMatchObject({ status: PlanStatus.PUBLISHED, policyResults: [] });
    expect((await stored(plan!.id)).policyResults).toEqual([]);
    expect(await calls()).toEqual(before);
  });

  test('without a clock of its own, the statement reads the database clock', async () => {
    const before = Date.now();
    const plan = await submitAtOnce('dev', { now: null, content: 'by the clock' });
    const submittedAt = plan!.submittedAt.getTime();
    expect(submittedAt).toBeGreaterThanOrEqual(before - 1_000);
    expect(submittedAt).toBeLessThanOrEqual(Date.now() + 1_000);
    expect((await stored(plan!.id)).submittedAt).toEqual(plan!.submittedAt);
  });

  test('a stale generation is refused: null, and nothing written', async () => {
    const before = await plansOf('dev');
    expect(
      await submitAtOnce('dev', { generation: generations.get('dev')! - 1, content: 'stale' }),
    ).toBeNull();
    expect(await plansOf('dev')).toEqual(before);
  });

  test('a proposal is PROPOSED, expiring by the environment’s time to live', async () => {
    const plan = await submitAtOnce('prod', { now: 10_000, content: 'proposal' });
    expect(plan).toMatchObject({
      sequence: 1,
      status: PlanStatus.PROPOSED,
      publishedAt: null,
      expiresAt: new Date(70_000),
    });
    expect((await stored(plan!.id)).expiresAt).toEqual(new Date(70_000));
  });

  test('an admission that would expire proposals fails the transaction, writing nothing', async () => {
    const first = await submitAtOnce('stage', { now: 10_000, content: 'first' });
    expect(first?.status).toBe(PlanStatus.PROPOSED);
    const error: unknown = await submitAtOnce('stage', { now: 200_000, content: 'later' }).then(
      () => null,
      (failed: unknown) => failed,
    );
    expect(atOnceDeclined(error)).toBe(true);
    expect(await plansOf('stage')).toEqual([{ id: first!.id, status: PlanStatus.PROPOSED }]);
  });

  test('only that failure is declined', async () => {
    // Another failure of the database (division by zero, SQLSTATE 22012).
    const failed: unknown = await dataSource.query('SELECT 1 / 0').then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed).toMatchObject({ driverError: { code: '22012' } });
    for (const error of [null, undefined, new Error('other'), failed, { driverError: {} }])
      expect(atOnceDeclined(error)).toBe(false);
    expect(atOnceDeclined({ driverError: { code: 'PF409' } })).toBe(true);
  });

  test('a submit that its policies decide is not this statement’s', async () => {
    await expect(
      inTransaction(0, (tx) =>
        plans.submitAtOnce(
          tx.manager,
          {
            ...submitRequest('dev', 'agent', generations.get('dev')!, 'x', {
              policy: {
                version: 0,
                results: [],
                denial: { policy: 'p', message: 'no' },
                rules: [],
              },
            }),
            now: 0,
            idempotency: null,
          },
          () => ({}),
        ),
      ),
    ).rejects.toThrow('this submit is decided by admitPlan');
  });
});
