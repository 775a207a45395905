import fc from 'fast-check';
import pg from 'pg';
import { AuditEvent } from '../src/model/audit-event.entity.js';
import { ManualClock } from '../src/common/clock.js';
import { Database, select } from '../src/database/database.js';
import { JsonLeaf, jsonTemplate } from '../src/database/json-text.js';
import { encode } from '../src/events/event-wire.js';
import { EVENTS_CHANNEL } from '../src/events/events.service.js';
import { planData } from '../src/outbox/outbox.service.js';
import { Plan } from '../src/model/plan.entity.js';
import { ok, scratchDatabase, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { until } from './support/until.js';
import { World } from './support/world.js';

/**
 * On PostgreSQL a common submit sends what it adds besides the plan (its events, its audit
 * event, its idempotency record, its notifications) with the decision, as SQL that reads
 * the decision from the transaction. What that SQL writes must be what the service's own
 * encoders write of the stored rows, byte for byte: a webhook's body, a subscriber's event
 * and a replayed call must not tell which way a decision went.
 */
const onPostgres = TEST_DATABASE === 'postgres' ? describe : describe.skip;
/** A channel of the test's own, whose notifications mark a point in the commit order. */
const BARRIER_CHANNEL = 'planfence_test_barrier';

/**
 * What the open transaction of `client` read of the plans' indexes and of the table itself:
 * a few index entries, no scan.
 */
async function expectReadByIndex(client: pg.Client): Promise<void> {
  const read = await client.query<{ index_entries: string; scanned: string }>(
    `SELECT (SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(indexrelid)), 0)
              FROM pg_index WHERE indrelid = 'plans'::regclass) AS index_entries,
            (SELECT seq_tup_read FROM pg_stat_xact_user_tables
              WHERE relname = 'plans') AS scanned`,
  );
  expect(Number(read.rows[0].scanned)).toBe(0);
  expect(Number(read.rows[0].index_entries)).toBeLessThan(20);
}

/** Stores SUPERSEDED plans 2–2001 of `generation` in `environment`, written directly. */
async function storeOlderPlans(
  client: pg.Client,
  environment: string,
  submitter: string,
  generation: number,
): Promise<void> {
  await client.query(
    `INSERT INTO plans (id, environment, generation, sequence, status, title, content,
       content_hash, content_type, submitted_by, submitted_at, policy_version)
     SELECT $1 || '@' || $3::int || '.' || s, $1, $3::int, s, 'SUPERSEDED', 'old', 'old', 'h',
       'TEXT', $2, 0, 0
     FROM generate_series(2, 2001) s`,
    [environment, submitter, generation],
  );
}

onPostgres('a submit decided at once on PostgreSQL', () => {
  let database: { url: string; cleanup: () => Promise<void> };
  let app: TestApp;
  let world: World;
  let listener: pg.Client;
  const heard: string[] = [];
  // A clock whose milliseconds are not zero: the dates' text carries them.
  const clock = new ManualClock(Date.UTC(2026, 4, 17, 9, 8, 7, 45));

  beforeAll(async () => {
    database = await scratchDatabase(true);
    app = await startApp({ DATABASE_URL: database.url }, clock);
    world = new World(app);
    listener = new pg.Client({ connectionString: database.url });
    await listener.connect();
    listener.on('notification', (message) => {
      if (message.channel === EVENTS_CHANNEL || message.channel === BARRIER_CHANNEL)
        heard.push(message.payload ?? '');
    });
    await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
    await listener.query(`LISTEN ${BARRIER_CHANNEL}`);
  });
  afterAll(async () => {
    await listener?.end();
    await app?.close();
    await database?.cleanup();
  });

  const dataSource = () => app.app.get(Database).dataSource;

  async function heardAtLeast(count: number): Promise<string[]> {
    for (let i = 0; i < 3000 && heard.length < count; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    return heard.splice(0);
  }

  let barriers = 0;
  /**
   * Forgets what the listener heard of everything committed so far, whether or not it has
   * arrived yet: PostgreSQL delivers a session's notifications in commit order, so a
   * notification of our own, once heard, comes after all of theirs.
   */
  async function forgetHeard(): Promise<void> {
    const barrier = `barrier-${++barriers}`;
    await listener.query('SELECT pg_notify($1, $2)', [BARRIER_CHANNEL, barrier]);
    await until(`the listener hears ${barrier}`, () => heard.includes(barrier));
    heard.splice(0, heard.indexOf(barrier) + 1);
  }

  async function stored(id: string) {
    const plan = await dataSource().getRepository(Plan).findOneByOrFail({ id });
    const audit = await dataSource()
      .getRepository(AuditEvent)
      .findOneByOrFail({ planId: id, action: 'SUBMIT_PLAN' });
    const events = await dataSource().query<
      {
        type: string;
        at: string;
        generation: number;
        sequence: number;
        actor: string;
        data: string;
      }[]
    >(
      'SELECT type, at, generation, sequence, actor, data FROM outbox_events WHERE plan_id = $1 ORDER BY id',
      [id],
    );
    return { plan, audit, events };
  }

  /** An environment whose plans need approval and whose proposals expire after 600 s. */
  async function createWithProposalTtl(name: string): Promise<void> {
    ok(
      await app.gql(
        world.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        { input: { name, mode: 'MONOTONIC', requireApproval: true, proposalTtlSeconds: 600 } },
      ),
    );
  }

  // proves: R9, R12, R22
  test("a publish's events, audit event, idempotency record and notifications are, byte for byte, what the encoders write of the stored rows", async () => {
    await world.createEnvironment('parity', 'MONOTONIC', false);
    const agent = await world.issue('parity-agent', 'AGENT');
    const generation = await world.acquire(agent, 'parity', 3600);
    await world.submitOk(agent, 'parity', generation, 'first');
    await forgetHeard();
    clock.advance(1_234);
    const title = 'Ünïcode "quoted" \\ back\\slash\ttab \u0001 ✓ 𝄞';
    const answered = await world.submitOk(agent, 'parity', generation, 'second', {
      idempotencyKey: 'parity-1',
      title,
    });

    const { plan, audit, events } = await stored(answered.id);
    expect(plan.title).toBe(title);
    expect(plan.status).toBe('PUBLISHED');
    expect(events.map((event) => event.type)).toEqual(['plan.submitted', 'plan.published']);
    for (const event of events) {
      expect(event.data).toBe(JSON.stringify(planData(plan)));
      expect(Number(event.at)).toBe(plan.submittedAt.getTime());
      expect([Number(event.generation), Number(event.sequence), event.actor]).toEqual([
        generation,
        2,
        'parity-agent',
      ]);
    }
    expect(audit).toMatchObject({ outcome: 'ACCEPTED', generation, actor: 'parity-agent' });
    expect(audit.at.getTime()).toBe(plan.submittedAt.getTime());
    expect(await heardAtLeast(2)).toEqual([encode('plan', plan), encode('audit', audit)]);

    const [record] = await dataSource().query<
      { plan_id: string; created_at: string; expires_at: string }[]
    >(
      'SELECT plan_id, created_at, expires_at FROM idempotency_records WHERE idempotency_key = $1',
      ['parity-1'],
    );
    expect(record.plan_id).toBe(answered.id);
    expect(Number(record.created_at)).toBe(plan.submittedAt.getTime());
    expect(Number(record.expires_at)).toBeGreaterThan(Number(record.created_at));
    // The record replays the first outcome.
    const again = await world.submitOk(agent, 'parity', generation, 'second', {
      idempotencyKey: 'parity-1',
      title,
    });
    expect(again.id).toBe(answered.id);
    expect((await stored(answered.id)).events).toHaveLength(2);
  });

  // proves: R12, R16, R22
  test('a proposal that expires: its one event and its audit event carry the expiry the environment set, and nothing announces a publication', async () => {
    await createWithProposalTtl('proposals');
    const agent = await world.issue('proposals-agent', 'AGENT');
    const generation = await world.acquire(agent, 'proposals', 3600);
    await forgetHeard();
    const answered = await world.submitOk(agent, 'proposals', generation, 'needs review');

    const { plan, audit, events } = await stored(answered.id);
    expect(plan.status).toBe('PROPOSED');
    expect(plan.expiresAt?.getTime()).toBe(plan.submittedAt.getTime() + 600_000);
    expect(events.map((event) => event.type)).toEqual(['plan.submitted']);
    expect(events[0].data).toBe(JSON.stringify(planData(plan)));
    expect(await heardAtLeast(1)).toEqual([encode('audit', audit)]);
  });

  // proves: R16, R22
  test('a submit whose admission expires a proposal is rolled back and decided again: the expiry is announced before the new plan', async () => {
    await createWithProposalTtl('expiring');
    const agent = await world.issue('expiring-agent', 'AGENT');
    const generation = await world.acquire(agent, 'expiring', 3600);
    const old = await world.submitOk(agent, 'expiring', generation, 'left waiting');
    clock.advance(601_000);
    const answered = await world.submitOk(agent, 'expiring', generation, 'after the expiry');

    expect((await stored(old.id)).events.map((event) => event.type)).toEqual([
      'plan.submitted',
      'plan.expired',
    ]);
    const { plan, events } = await stored(answered.id);
    expect(plan.status).toBe('PROPOSED');
    expect(events.map((event) => event.type)).toEqual(['plan.submitted']);
    const [expired] = await dataSource().query<{ id: string }[]>(
      "SELECT id FROM outbox_events WHERE plan_id = $1 AND type = 'plan.expired'",
      [old.id],
    );
    const [submitted] = await dataSource().query<{ id: string }[]>(
      'SELECT id FROM outbox_events WHERE plan_id = $1',
      [answered.id],
    );
    expect(Number(expired.id)).toBeLessThan(Number(submitted.id));
    // One accepted submit of the new plan: nothing of the rolled-back attempt remains.
    const accepted = await dataSource()
      .getRepository(AuditEvent)
      .findBy({ planId: answered.id, action: 'SUBMIT_PLAN' });
    expect(accepted.map((event) => event.outcome)).toEqual(['ACCEPTED']);
  });

  test('on a table PostgreSQL never analyzed, a publish reads the plans it needs by their index, not every plan of the environment', async () => {
    await world.createEnvironment('indexed', 'MONOTONIC', false);
    const agent = await world.issue('indexed-agent', 'AGENT');
    const generation = await world.acquire(agent, 'indexed', 3600);
    await world.submitOk(agent, 'indexed', generation, 'published');
    // 2,000 plans of the same generation before it, and no statistics on the table (the
    // planner's state in a new database, or on a table that grew since autovacuum looked).
    await listener.query('ALTER TABLE plans SET (autovacuum_enabled = false)');
    await storeOlderPlans(listener, 'indexed', 'indexed-agent', generation);
    const [analyzed] = (
      await listener.query<{ analyzed: boolean }>(
        `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL AS analyzed
         FROM pg_stat_user_tables WHERE relname = 'plans'`,
      )
    ).rows;
    expect(analyzed.analyzed).toBe(false);
    const [{ policy_version: policyVersion }] = (
      await listener.query<{ policy_version: number }>(
        "SELECT policy_version FROM environments WHERE name = 'indexed'",
      )
    ).rows;
    // The function as a pooled connection runs it once its plans are kept: generic plans.
    await listener.query('BEGIN');
    try {
      await listener.query("SET LOCAL plan_cache_mode = 'force_generic_plan'");
      const decided = await listener.query<{ decision: { outcome: string; sequence: number } }>(
        `SELECT planfence_submit_plan($1, 'indexed-agent', $2, $3, NULL, NULL, 'next', 'next',
           'h', 'TEXT', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS decision`,
        ['indexed', generation, policyVersion],
      );
      expect(decided.rows[0].decision).toMatchObject({ outcome: 'admitted', sequence: 2002 });
      await expectReadByIndex(listener);
      // The plan published before it is SUPERSEDED by the same statement's effects.
      const statuses = await listener.query<{ status: string; n: string }>(
        "SELECT status, COUNT(*) AS n FROM plans WHERE environment = 'indexed' GROUP BY status ORDER BY status",
      );
      expect(statuses.rows.map((r) => [r.status, Number(r.n)])).toEqual([
        ['PUBLISHED', 1],
        ['SUPERSEDED', 2001],
      ]);
    } finally {
      await listener.query('ROLLBACK');
      await listener.query('ALTER TABLE plans RESET (autovacuum_enabled)');
    }
  });

  test('a session that planned the submit at once while the environment had one plan still finds the stored plan by its index once it has thousands', async () => {
    await world.createEnvironment('kept-plans', 'MONOTONIC', false);
    const agent = await world.issue('kept-plans-agent', 'AGENT');
    const generation = await world.acquire(agent, 'kept-plans', 3600);
    const [{ policy_version: policyVersion }] = (
      await listener.query<{ policy_version: number }>(
        "SELECT policy_version FROM environments WHERE name = 'kept-plans'",
      )
    ).rows;
    // What the service sends besides the plan, reduced to what the function needs.
    const record = {
      actor: 'kept-plans-agent',
      channel: BARRIER_CHANNEL,
      data: [''],
      events: [],
      audit: {
        environment: 'kept-plans',
        actor: 'kept-plans-agent',
        action: 'SUBMIT_PLAN',
        generation,
        outcome: 'ACCEPTED',
        code: null,
        detail: null,
        via: null,
      },
      idempotency: null,
      notifications: [],
    };
    const submitAtOnce = (client: pg.Client, title: string) =>
      client.query<{ decision: { outcome: string; sequence: number } }>(
        `SELECT planfence_submit_plan_at_once($1, 'kept-plans-agent', $2, $3, NULL, NULL, $4, $4,
           'h', 'TEXT', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, $5) AS decision`,
        ['kept-plans', generation, policyVersion, title, JSON.stringify(record)],
      );
    // One session throughout, as a pooled connection: the plans its function chose first
    // (generic plans, with the environment's one plan) are the plans it keeps.
    const session = new pg.Client({ connectionString: database.url });
    await session.connect();
    try {
      await session.query('ALTER TABLE plans SET (autovacuum_enabled = false)');
      await session.query("SET plan_cache_mode = 'force_generic_plan'");
      const first = await submitAtOnce(session, 'first');
      expect(first.rows[0].decision).toMatchObject({ outcome: 'admitted', sequence: 1 });
      await storeOlderPlans(listener, 'kept-plans', 'kept-plans-agent', generation);
      await session.query('BEGIN');
      const decided = await submitAtOnce(session, 'next');
      expect(decided.rows[0].decision).toMatchObject({ outcome: 'admitted', sequence: 2002 });
      await expectReadByIndex(session);
      await session.query('ROLLBACK');
    } finally {
      await session.query('ALTER TABLE plans RESET (autovacuum_enabled)').catch(() => undefined);
      await session.end();
    }
  });

  // proves: R22
  test('the JSON text the database fills in is the text JSON.stringify writes, whatever the values', async () => {
    const m = dataSource().manager;
    const text = fc.string({ unit: 'binary', maxLength: 40 }).map((s) => s.replace(/\p{Cs}/gu, ''));
    const literal = fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null));
    // A leaf's value: what JSON.stringify writes of it is the leaf's JSON text.
    const member = fc.oneof(
      literal.map((value) => ({ value, leaf: true })),
      literal.map((value) => ({ value, leaf: false })),
      fc.array(literal, { maxLength: 3 }).map((value) => ({ value, leaf: false })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          text.filter((key) => key !== '__proto__'),
          fc.array(member, { maxLength: 3 }),
        ),
        async (shape) => {
          const given: Record<string, unknown> = {};
          const expected: Record<string, unknown> = {};
          const leaves: Record<string, string> = {};
          for (const [key, members] of Object.entries(shape)) {
            given[key] = members.map(({ value, leaf }) => {
              if (!leaf) return value;
              const name = `leaf${Object.keys(leaves).length}`;
              leaves[name] = JSON.stringify(value);
              return new JsonLeaf(name);
            });
            expected[key] = members.map(({ value }) => value);
          }
          const [row] = await select<{ text: string }>(
            m,
            'SELECT planfence_fill(CAST(:template AS jsonb), CAST(:leaves AS jsonb)) AS text',
            { template: JSON.stringify(jsonTemplate(given)), leaves: JSON.stringify(leaves) },
          );
          expect(row.text).toBe(JSON.stringify(expected));
        },
      ),
      { numRuns: 60 },
    );
  });

  test("the database writes a date's ISO text as JSON.stringify writes a Date", async () => {
    const m = dataSource().manager;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 253402300799999 }), async (millis) => {
        const [row] = await select<{ text: string }>(
          m,
          'SELECT planfence_iso_millis(CAST(:millis AS bigint)) AS text',
          { millis },
        );
        expect(`"${row.text}"`).toBe(JSON.stringify(new Date(millis)));
      }),
      { numRuns: 100 },
    );
  });
});

onPostgres('submits at once of one environment that wait for its turn', () => {
  let database: { url: string; cleanup: () => Promise<void> };
  let app: TestApp;
  let world: World;
  /** Holds environments' rows, as a long decision of another instance would. */
  let holder: pg.Client;

  beforeAll(async () => {
    database = await scratchDatabase(true);
    app = await startApp({
      DATABASE_URL: database.url,
      PLANFENCE_PG_DECISIONS_PER_ENVIRONMENT: '1',
    });
    world = new World(app);
    holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await app?.close();
    await database?.cleanup();
  });

  const db = () => app.app.get(Database);

  /**
   * Submits `first` while another transaction holds the environment's row, so that it waits
   * in the database with the environment's one turn; then submits each of `gathered`, one
   * after the other, each once the one before it waits in the service for that turn; then
   * lets the row go. Returns the answers, `first`'s first.
   */
  async function whileTheTurnIsHeld(
    environment: string,
    first: () => ReturnType<World['submit']>,
    gathered: (() => ReturnType<World['submit']>)[],
    beforeRelease: () => Promise<void> = () => Promise.resolve(),
  ) {
    await holder.query('BEGIN');
    await holder.query('SELECT name FROM environments WHERE name = $1 FOR UPDATE', [environment]);
    const answers = [first()];
    await until('the first submit waits for the row', async () => {
      const [{ waiting }] = (
        await holder.query<{ waiting: number }>(
          "SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
      ).rows;
      return waiting === 1;
    });
    for (const [i, submit] of gathered.entries()) {
      answers.push(submit());
      await until(`${i + 1} submits wait for the turn`, () => db().decisionsWaiting === i + 1);
    }
    await beforeRelease();
    await holder.query('COMMIT');
    return Promise.all(answers);
  }

  /** The id of the transaction that wrote each plan's accepted submit (audit rows are never updated). */
  async function writtenBy(ids: string[]): Promise<string[]> {
    const rows = await db().dataSource.query<{ plan_id: string; xmin: string }[]>(
      "SELECT plan_id, xmin::text AS xmin FROM audit_events WHERE plan_id = ANY($1) AND action = 'SUBMIT_PLAN' AND outcome = 'ACCEPTED'",
      [ids],
    );
    expect(rows).toHaveLength(ids.length);
    return ids.map((id) => rows.find((row) => row.plan_id === id)!.xmin);
  }

  // proves: R2, R3, R12
  test('they share one transaction, and each is decided as it would be alone, in arrival order', async () => {
    await world.createEnvironment('gathered', 'MONOTONIC', false);
    const agent = await world.issue('gathered-agent', 'AGENT');
    const stranger = await world.issue('gathered-stranger', 'AGENT');
    const generation = await world.acquire(agent, 'gathered', 3600);
    const submit =
      (content: string, token = agent) =>
      () =>
        world.submit(token, 'gathered', generation, content);
    const [first, second, third, notIssued, fourth] = await whileTheTurnIsHeld(
      'gathered',
      submit('first'),
      [submit('second'), submit('third'), submit('not issued to it', stranger), submit('fourth')],
    );
    // A rejection is decided in the shared transaction too (it writes nothing there), then
    // named by the statement that answers it.
    expect(notIssued.errors?.[0]?.extensions?.code).toBe('UNKNOWN_GENERATION');
    const plans = [first, second, third, fourth].map((answer) => ok(answer).submitPlan);
    expect(plans.map((plan) => plan.sequence)).toEqual([1, 2, 3, 4]);
    const [alone, ...together] = await writtenBy(plans.map((plan) => plan.id));
    expect(new Set(together).size).toBe(1);
    expect(together[0]).not.toBe(alone);

    const stored = await world.plans('gathered');
    expect(Object.fromEntries(stored.map((plan) => [plan.sequence, plan.status]))).toEqual({
      1: 'SUPERSEDED',
      2: 'SUPERSEDED',
      3: 'SUPERSEDED',
      4: 'PUBLISHED',
    });
    expect((await world.environment('gathered')).currentPlan?.id).toBe(plans[3].id);
    const events = await world.auditEvents('gathered');
    const accepted = events.filter(
      (event) => event.action === 'SUBMIT_PLAN' && event.outcome === 'ACCEPTED',
    );
    expect(accepted.map((event) => event.planId).sort()).toEqual(
      plans.map((plan) => plan.id).sort(),
    );
    expect(
      events.filter((event) => event.actor === 'gathered-stranger').map((event) => event.code),
    ).toEqual(['UNKNOWN_GENERATION']);
  });

  // proves: R2, R12, R16
  test('when one of them cannot commit with the others (its admission expires a proposal), each is decided alone, in arrival order', async () => {
    ok(
      await app.gql(
        world.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        {
          input: {
            name: 'one-fails',
            mode: 'MONOTONIC',
            requireApproval: true,
            proposalTtlSeconds: 600,
          },
        },
      ),
    );
    const agent = await world.issue('one-fails-agent', 'AGENT');
    const generation = await world.acquire(agent, 'one-fails', 3600);
    const old = await world.submitOk(agent, 'one-fails', generation, 'left waiting');
    world.advance(300);
    const submit = (content: string) => () => world.submit(agent, 'one-fails', generation, content);
    const answers = await whileTheTurnIsHeld('one-fails', submit('first'), [
      // Its clock is read once the others gathered: it comes after the proposal expired.
      () => {
        world.advance(301);
        return world.submit(agent, 'one-fails', generation, 'expires it');
      },
      submit('third'),
      submit('fourth'),
    ]);
    const plans = answers.map((answer) => ok(answer).submitPlan);
    expect(plans.map((plan) => [plan.sequence, plan.status])).toEqual([
      [2, 'PROPOSED'],
      [3, 'PROPOSED'],
      [4, 'PROPOSED'],
      [5, 'PROPOSED'],
    ]);
    expect(new Set(await writtenBy(plans.map((plan) => plan.id))).size).toBe(4);
    expect((await world.plan(old.id))?.status).toBe('EXPIRED');
    const accepted = (await world.auditEvents('one-fails')).filter(
      (event) => event.action === 'SUBMIT_PLAN' && event.outcome === 'ACCEPTED',
    );
    expect(accepted).toHaveLength(5);
  });
});
