import { Database, executeLater, selectLater } from '../src/database/database.js';
import { ok, scratchDatabase, startApp, TEST_DATABASE, type TestApp } from './support/app.js';
import { Deployments } from './support/deployers.js';
import { frontendStatements, LatencyProxy } from './support/latency-proxy.js';
import { World } from './support/world.js';

/**
 * What a decision costs in round trips to PostgreSQL, seen on the wire: the service reaches
 * its database through a proxy that holds every chunk 25 ms each way, so statements the
 * service sends without waiting travel together, and each (connection, turn) the decision's
 * statements were sent in is one round trip. The sweeps the service makes on its own (the
 * lease queue's, the webhook dispatcher's) are left out by their text.
 */
const onPostgres = TEST_DATABASE === 'postgres' ? describe : describe.skip;

const BACKGROUND = [/FROM lease_tickets t JOIN environments/, /EXISTS \(SELECT 1 FROM webhooks\)/];

onPostgres('round trips of a decision on PostgreSQL', () => {
  let database: { url: string; cleanup: () => Promise<void> };
  let proxy: LatencyProxy;
  let app: TestApp;
  let world: World;
  let trace: { connection: number; turn: number; sql: string }[] | null = null;

  beforeAll(async () => {
    database = await scratchDatabase(true);
    const target = new URL(database.url);
    // Without delay until a traced call: setting up what a test traces costs no wait.
    proxy = new LatencyProxy(
      { host: target.hostname, port: Number(target.port || 5432) },
      0,
      (chunk, _turn, connection) => {
        if (!trace) return;
        for (const text of frontendStatements(chunk)) {
          const sql = text.replace(/\s+/g, ' ').trim();
          if (!BACKGROUND.some((background) => background.test(sql)))
            trace.push({ connection: connection.id, turn: connection.turn, sql });
        }
      },
    );
    const through = new URL(database.url);
    through.host = `127.0.0.1:${await proxy.start()}`;
    app = await startApp({ DATABASE_URL: through.toString() }, null);
    world = new World(app);
  });
  afterAll(async () => {
    await app?.close();
    await proxy?.stop();
    await database?.cleanup();
  });

  /** Runs `call` and returns the statements it sent and the round trips they took. */
  async function traced(call: () => Promise<unknown>) {
    trace = [];
    // The delay makes what the service sends before it waits for an answer arrive as one
    // turn, so that the turns counted are its round trips.
    proxy.delayMs = 25;
    try {
      await call();
    } finally {
      proxy.delayMs = 0;
    }
    const seen = trace;
    trace = null;
    const roundTrips = new Set(seen.map(({ connection, turn }) => `${connection}:${turn}`)).size;
    /** The statements of each round trip, in the order they were sent. */
    const trips = new Map<string, string[]>();
    for (const { connection, turn, sql } of seen) {
      const key = `${connection}:${turn}`;
      trips.set(key, [...(trips.get(key) ?? []), sql]);
    }
    return { statements: seen.map(({ sql }) => sql), roundTrips, trips: [...trips.values()] };
  }

  /** The statements of the round trip that carried the statement beginning with `start`. */
  function tripOf(trips: string[][], start: string): string[] {
    const trip = trips.find((statements) => statements.some((sql) => sql.startsWith(start)));
    if (!trip) throw new Error(`no statement began with ${start}`);
    return trip;
  }

  /** Statements beginning with these, in this order. */
  const beginning = (starts: string[]) =>
    starts.map((start) =>
      expect.stringMatching(new RegExp(`^${start.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)),
    );

  // proves: R2, R8, R13
  test('an approval that publishes sends its statements together: the hold, the expiries and the approval in one round trip, the publication, its consequences and its audit id in the next', async () => {
    await world.createEnvironment('review', 'MONOTONIC', true);
    const agent = await world.issue('review-agent', 'AGENT');
    const reviewer = await world.issue('review-reviewer', 'REVIEWER');
    const generation = await world.acquire(agent, 'review', 3600);
    const first = await world.submitOk(agent, 'review', generation, 'first');
    ok(await world.approve(reviewer, first.id));
    const passedOver = await world.submitOk(agent, 'review', generation, 'passed over');
    const second = await world.submitOk(agent, 'review', generation, 'second');
    const { trips, roundTrips } = await traced(async () =>
      expect(ok(await world.approve(reviewer, second.id)).approvePlan.status).toBe('PUBLISHED'),
    );
    expect(tripOf(trips, 'INSERT INTO approvals')).toEqual(
      beginning([
        'UPDATE environments SET fence = fence',
        "UPDATE plans SET status = 'EXPIRED'",
        'INSERT INTO approvals',
      ]),
    );
    expect(tripOf(trips, 'UPDATE environments SET current_plan_id')).toEqual(
      beginning([
        "SELECT nextval(pg_get_serial_sequence('audit_events', 'id'))",
        'UPDATE environments SET current_plan_id',
        "UPDATE plans SET status = 'PUBLISHED'",
        "UPDATE plans SET status = 'SUPERSEDED'",
        "UPDATE plans SET status = 'OBSOLETE'",
        'SELECT * FROM "plans"',
      ]),
    );
    // BEGIN with the clock; the token's check with the plan's read; the two above (the
    // second also draws the id of the decision's audit event); the snapshot's read, the
    // rows the decision adds and their notifications with the commit.
    expect(roundTrips).toBeLessThanOrEqual(5);
    expect(tripOf(trips, 'COMMIT')).toEqual(
      beginning([
        'SELECT approver, at, content_hash',
        'WITH w0 AS (INSERT INTO outbox_events',
        'COMMIT',
      ]),
    );
    const [accepted] = (await world.auditEvents('review')).filter(
      (event) => event.action === 'APPROVE_PLAN',
    );
    expect(accepted).toMatchObject({ outcome: 'ACCEPTED', planId: second.id });
    expect((await world.plan(first.id))?.status).toBe('SUPERSEDED');
    expect((await world.plan(passedOver.id))?.status).toBe('OBSOLETE');
    expect((await world.environment('review')).currentPlan?.id).toBe(second.id);
  });

  // proves: R8, R13, R14
  test('an approval that does not complete the rules sends the publication too, which changes nothing', async () => {
    ok(
      await world.gql(
        world.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        { input: { name: 'quorum', approvalRules: [{ group: null, count: 2 }] } },
      ),
    );
    const agent = await world.issue('quorum-agent', 'AGENT');
    const reviewer = await world.issue('quorum-reviewer', 'REVIEWER');
    const generation = await world.acquire(agent, 'quorum', 3600);
    const published = await world.submitOk(agent, 'quorum', generation, 'published');
    ok(await world.approve(world.admin, published.id, { breakGlassReason: 'the first plan' }));
    const proposal = await world.submitOk(agent, 'quorum', generation, 'needs two');
    const { trips } = await traced(async () =>
      expect(ok(await world.approve(reviewer, proposal.id)).approvePlan.status).toBe('PROPOSED'),
    );
    // The audit id, the pointer, the plan's PUBLISHED, R8's two updates and the plan's read.
    expect(tripOf(trips, 'UPDATE environments SET current_plan_id')).toHaveLength(6);
    expect((await world.plan(proposal.id))?.status).toBe('PROPOSED');
    expect((await world.plan(published.id))?.status).toBe('PUBLISHED');
    expect((await world.environment('quorum')).currentPlan?.id).toBe(published.id);
  });

  // proves: R2, R3, R9, R12
  test("a publish takes one round trip: the token's check, the statement that decides and records, and the commit travel together", async () => {
    await world.createEnvironment('prod', 'MONOTONIC', false);
    const agent = await world.issue('agent', 'AGENT');
    const generation = await world.acquire(agent, 'prod', 3600);
    // Warm: the policies of the environment are remembered, the connections open.
    await world.submitOk(agent, 'prod', generation, 'warm');

    const { statements, roundTrips } = await traced(() =>
      world.submitOk(agent, 'prod', generation, 'traced', { idempotencyKey: 'traced-1' }),
    );

    // The agent's principal is remembered from the warm call: no read before the transaction.
    expect(statements.map((sql) => sql.split(' (')[0].split(' FROM ')[0])).toEqual([
      'BEGIN',
      'SELECT planfence_check_token(CAST($1 AS text), CAST($2 AS text))',
      'SELECT planfence_submit_plan_at_once(CAST($1 AS text), CAST($2 AS text), CAST($3 AS integer), CAST($4 AS integer), CAST($5 AS text), CAST($6 AS integer), CAST($7 AS text), CAST($8 AS text), CAST($9 AS text), CAST($10 AS text), CAST($11 AS text), CAST($12 AS text), CAST($13 AS text), CAST($14 AS text), CAST($15 AS text), CAST($16 AS bigint), CAST($17 AS text), CAST($18 AS text), CAST($19 AS jsonb)) AS decision',
      'COMMIT',
    ]);
    // The statement records what the decision adds (the outbox rows, the audit event, the
    // idempotency record, the notifications) itself, from what the service encoded.
    expect(roundTrips).toBe(1);

    // What it decided is what the guard's statements decide: published, the one before superseded.
    const env = await world.environment('prod');
    expect(env.currentPlan?.id).toBe(`prod@${generation}.2`);
    expect((await world.plan(`prod@${generation}.1`))?.status).toBe('SUPERSEDED');
    const audit = await world.auditEvents('prod');
    const accepted = audit.filter(
      (event) => event.action === 'SUBMIT_PLAN' && event.outcome === 'ACCEPTED',
    );
    expect(accepted.map((event) => event.planId)).toEqual([
      `prod@${generation}.2`,
      `prod@${generation}.1`,
    ]);
  });

  // proves: R9
  test('a repeated call with its key decides nothing: the statement finds the record, and the first outcome is replayed', async () => {
    await world.createEnvironment('again', 'MONOTONIC', false);
    const agent = await world.issue('again-agent', 'AGENT');
    const generation = await world.acquire(agent, 'again', 3600);
    const first = await world.submitOk(agent, 'again', generation, 'once', {
      idempotencyKey: 'again-1',
    });
    const { statements } = await traced(() =>
      world.submitOk(agent, 'again', generation, 'once', { idempotencyKey: 'again-1' }),
    );
    expect(statements.filter((sql) => sql.startsWith('INSERT'))).toEqual([]);
    expect(await world.plans('again')).toHaveLength(1);
    expect((await world.plan(first.id))?.status).toBe('PUBLISHED');
  });

  test('rows held back for the commit are joined per run of different tables: two rows of one table stay in the order they were made', async () => {
    const db = app.get(Database);
    await db.dataSource.query('CREATE TABLE later_a (id serial PRIMARY KEY, v text NOT NULL)');
    await db.dataSource.query('CREATE TABLE later_b (id serial PRIMARY KEY, v text NOT NULL)');
    const { statements, roundTrips } = await traced(() =>
      db.write(async (m) => {
        await executeLater(m, 'INSERT INTO later_a (v) VALUES (:v)', { v: 'first' });
        await executeLater(m, 'INSERT INTO later_b (v) VALUES (:v)', { v: 'beside' });
        await executeLater(m, 'INSERT INTO later_a (v) VALUES (:v)', { v: 'second' });
        await executeLater(m, 'SELECT count(*) FROM later_b WHERE v = :v', { v: 'beside' });
      }),
    );
    expect(statements).toEqual([
      'BEGIN',
      'WITH w0 AS (INSERT INTO later_a (v) VALUES ($1)), w1 AS (INSERT INTO later_b (v) VALUES ($2)) SELECT 1',
      'WITH w0 AS (INSERT INTO later_a (v) VALUES ($1)) SELECT count(*) FROM later_b WHERE v = $2',
      'COMMIT',
    ]);
    expect(roundTrips).toBe(1);
    const rows = await db.dataSource.query<{ v: string }[]>('SELECT v FROM later_a ORDER BY id');
    expect(rows.map((row) => row.v)).toEqual(['first', 'second']);
    expect(await db.dataSource.query('SELECT v FROM later_b')).toEqual([{ v: 'beside' }]);
  });

  // proves: R2, R16
  test('a rejection sends the hold, the expiries and its decision together', async () => {
    await world.createEnvironment('refuse', 'MONOTONIC', true);
    const agent = await world.issue('refuse-agent', 'AGENT');
    const reviewer = await world.issue('refuse-reviewer', 'REVIEWER');
    const generation = await world.acquire(agent, 'refuse', 3600);
    const plan = await world.submitOk(agent, 'refuse', generation, 'not this one');
    const { trips } = await traced(async () =>
      expect(ok(await world.reject(reviewer, plan.id, 'no')).rejectPlan.status).toBe('REJECTED'),
    );
    expect(tripOf(trips, "UPDATE plans SET status = 'REJECTED'")).toEqual(
      beginning([
        'UPDATE environments SET fence = fence',
        "UPDATE plans SET status = 'EXPIRED'",
        "UPDATE plans SET status = 'REJECTED'",
      ]),
    );
    expect((await world.plan(plan.id))?.status).toBe('REJECTED');
  });

  // proves: R1, R10, R37
  test("an acquire sends the queue's hand-off in one round trip, the grant with its read in the next, and what it records in a third", async () => {
    await world.createEnvironment('granted', 'MONOTONIC', true);
    const agent = await world.issue('granted-agent', 'AGENT');
    const { trips } = await traced(() => world.acquire(agent, 'granted', 3600));
    expect(tripOf(trips, "UPDATE lease_tickets SET status = 'EXPIRED'")).toEqual(
      beginning([
        'UPDATE environments SET fence = fence',
        "UPDATE lease_tickets SET status = 'EXPIRED'",
        'UPDATE environments SET last_issued_generation',
      ]),
    );
    expect(tripOf(trips, 'SELECT * FROM "environments"')).toEqual(
      beginning(['UPDATE environments SET last_issued_generation', 'SELECT * FROM "environments"']),
    );
    expect(tripOf(trips, 'INSERT INTO "lease_grants"')).toEqual(
      beginning([
        'INSERT INTO "lease_grants"',
        "UPDATE plans SET status = 'EXPIRED'",
        "UPDATE plans SET status = 'OBSOLETE'",
      ]),
    );
  });

  // proves: R10, R16
  test('a renewal sends the expiries and the read of its lease together', async () => {
    await world.createEnvironment('renewed', 'MONOTONIC', true);
    const agent = await world.issue('renewed-agent', 'AGENT');
    const generation = await world.acquire(agent, 'renewed', 3600);
    const { trips } = await traced(async () =>
      expect(ok(await world.renew(agent, 'renewed', generation, 60)).renewLease.generation).toBe(
        generation,
      ),
    );
    expect(tripOf(trips, "UPDATE plans SET status = 'EXPIRED'")).toEqual(
      beginning(["UPDATE plans SET status = 'EXPIRED'", 'SELECT * FROM "environments"']),
    );
  });

  test('a read held back travels with the commit and answers with it; one held back by a transaction that fails rejects', async () => {
    const db = app.get(Database);
    await db.dataSource.query('CREATE TABLE later_read (v text NOT NULL)');
    let read: Promise<{ v: string }[]> | undefined;
    const { statements, roundTrips } = await traced(() =>
      db.write(async (m) => {
        await executeLater(m, 'INSERT INTO later_read (v) VALUES (:v)', { v: 'mine' });
        read = selectLater<{ v: string }>(m, 'SELECT v FROM later_read WHERE v = :v', {
          v: 'mine',
        });
      }),
    );
    expect(await read).toEqual([{ v: 'mine' }]);
    expect(statements).toEqual([
      'BEGIN',
      'INSERT INTO later_read (v) VALUES ($1)',
      'SELECT v FROM later_read WHERE v = $1',
      'COMMIT',
    ]);
    expect(roundTrips).toBe(1);

    let dropped: Promise<unknown> | undefined;
    await expect(
      db.write((m) => {
        dropped = selectLater(m, 'SELECT v FROM later_read');
        // Who holds it back decides whether to wait for it: here, after the transaction.
        dropped.catch(() => undefined);
        return Promise.reject(new Error('the decision failed'));
      }),
    ).rejects.toThrow('the decision failed');
    await expect(dropped).rejects.toThrow('the transaction failed before this read was sent');
  });

  /** Revokes `name` behind the service's back: no instance hears of it (a lost NOTIFY). */
  async function revokeUnheard(name: string) {
    await app.app
      .get(Database)
      .dataSource.query('UPDATE principals SET revoked_at = $1 WHERE name = $2', [
        Date.now(),
        name,
      ]);
  }

  // proves: R26
  test("a token revoked where no instance heard it: the remembered principal's submit is refused by the check in its transaction, and nothing of it commits", async () => {
    await world.createEnvironment('unheard', 'MONOTONIC', false);
    const agent = await world.issue('unheard-agent', 'AGENT');
    const generation = await world.acquire(agent, 'unheard', 3600);
    await world.submitOk(agent, 'unheard', generation, 'before');
    const auditBefore = (await world.auditEvents('unheard')).length;
    await revokeUnheard('unheard-agent');

    const { statements, roundTrips } = await traced(async () => {
      const result = await world.submit(agent, 'unheard', generation, 'after');
      expect(result.errors?.[0]).toMatchObject({
        message: 'this token was revoked',
        extensions: { code: 'UNAUTHENTICATED' },
      });
    });
    // Taken from memory, checked with the decision: the transaction rolled back.
    expect(statements.some((sql) => sql.startsWith('SELECT planfence_check_token'))).toBe(true);
    expect(statements.at(-1)).toBe('ROLLBACK');
    expect(roundTrips).toBeLessThanOrEqual(3);
    expect(await world.plans('unheard')).toHaveLength(1);
    expect(await world.auditEvents('unheard')).toHaveLength(auditBefore);
    // Reads never take a principal from memory on PostgreSQL: the row says revoked.
    const read = await app.gql(agent, '{ whoami { name } }');
    expect(read.errors?.[0]).toMatchObject({
      message: 'this token was revoked',
      extensions: { code: 'UNAUTHENTICATED' },
    });
  });

  // proves: R13, R26
  test('a reviewer revoked where no instance heard it: the approval is refused by the check, and the plan stays proposed', async () => {
    await world.createEnvironment('unheard-review', 'MONOTONIC', true);
    const agent = await world.issue('unheard-review-agent', 'AGENT');
    const reviewer = await world.issue('unheard-reviewer', 'REVIEWER');
    const generation = await world.acquire(agent, 'unheard-review', 3600);
    const first = await world.submitOk(agent, 'unheard-review', generation, 'first');
    const second = await world.submitOk(agent, 'unheard-review', generation, 'second');
    // Remembered by a decision of its own.
    ok(await world.reject(reviewer, first.id, 'not this one'));
    await revokeUnheard('unheard-reviewer');
    const result = await world.approve(reviewer, second.id);
    expect(result.errors?.[0]).toMatchObject({
      message: 'this token was revoked',
      extensions: { code: 'UNAUTHENTICATED' },
    });
    expect((await world.plan(second.id))?.status).toBe('PROPOSED');
    expect((await world.environment('unheard-review')).currentPlan).toBeNull();
  });

  // proves: R26
  test('a remembered principal refused by its role is answered for the row as it is now', async () => {
    await world.createEnvironment('unheard-role', 'MONOTONIC', true);
    const agent = await world.issue('unheard-role-agent', 'AGENT');
    const generation = await world.acquire(agent, 'unheard-role', 3600);
    const plan = await world.submitOk(agent, 'unheard-role', generation, 'mine');
    await revokeUnheard('unheard-role-agent');
    // An AGENT may not approve: the refusal reads the row first, which says revoked.
    const result = await world.approve(agent, plan.id);
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  // proves: R3, R12
  test("a stale generation's submit is rejected by the statement, decided again by the guard's statements, and named by their reads", async () => {
    await world.createEnvironment('stale', 'MONOTONIC', false);
    const agent = await world.issue('stale-agent', 'AGENT');
    const old = await world.acquire(agent, 'stale', 3600);
    ok(await world.release(agent, 'stale', old));
    const current = await world.acquire(agent, 'stale', 3600);
    await world.submitOk(agent, 'stale', current, 'new');
    const { statements, roundTrips } = await traced(async () => {
      const result = await world.submit(agent, 'stale', old, 'old');
      expect(result.errors?.[0]?.extensions?.code).toBe('STALE_GENERATION');
    });
    // Sent at once, not admitted: that transaction wrote nothing, and the guard's statements
    // (admitPlan's, as on SQLite) decide it again in the next, with the reads that name it.
    const decisions = statements.filter((sql) =>
      /^(SELECT planfence_submit_plan|UPDATE environments SET fence = \$|COMMIT|ROLLBACK)/.test(
        sql,
      ),
    );
    expect(decisions.map((sql) => sql.split('(')[0].split('\n')[0].trim())).toEqual([
      'SELECT planfence_submit_plan_at_once',
      'COMMIT',
      'UPDATE environments SET fence = $1 WHERE name = $2 AND policy_version = $3 AND EXISTS',
      'COMMIT',
    ]);
    // A rejection's price: the statement at once, then admitPlan's reads and statement, the
    // reads that name the refusal and the audit event with the COMMIT (11 measured; an
    // admission takes one).
    expect(roundTrips).toBeLessThanOrEqual(11);
    const rejected = (await world.auditEvents('stale')).filter(
      (event) => event.outcome === 'REJECTED',
    );
    expect(rejected.map((event) => [event.code, event.generation])).toEqual([
      ['STALE_GENERATION', old],
    ]);
  });
  test('a page of plans reads the approvals and the pending rules of all its plans in one statement each', async () => {
    ok(
      await world.gql(
        world.admin,
        'mutation($input: CreateEnvironmentInput!) { createEnvironment(input: $input) { name } }',
        { input: { name: 'page', approvalRules: [{ group: null, count: 2 }] } },
      ),
    );
    const agent = await world.issue('page-agent', 'AGENT');
    const reviewer = await world.issue('page-reviewer', 'REVIEWER');
    const generation = await world.acquire(agent, 'page', 3600);
    const plans: { id: string }[] = [];
    for (const content of ['one', 'two', 'three'])
      plans.push(await world.submitOk(agent, 'page', generation, content));
    ok(await world.approve(reviewer, plans[1].id));
    const { statements } = await traced(async () => {
      const result = await app.gql<{
        plans: { id: string; approvals: { approver: string }[]; pendingApprovalRules: unknown[] }[];
      }>(
        world.admin,
        '{ plans(environment: "page", first: 10) { id approvals { approver } pendingApprovalRules { group count } } }',
      );
      expect(result.errors).toBeUndefined();
      const byId = new Map(result.data!.plans.map((plan) => [plan.id, plan]));
      expect(plans.map((plan) => byId.get(plan.id))).toEqual([
        { id: plans[0].id, approvals: [], pendingApprovalRules: [{ group: null, count: 2 }] },
        {
          id: plans[1].id,
          approvals: [{ approver: 'page-reviewer' }],
          pendingApprovalRules: [{ group: null, count: 1 }],
        },
        { id: plans[2].id, approvals: [], pendingApprovalRules: [{ group: null, count: 2 }] },
      ]);
    });
    expect(statements.filter((sql) => sql.startsWith('SELECT plan_id, approver'))).toHaveLength(1);
    expect(
      statements.filter((sql) => sql.startsWith('SELECT p.id AS plan_id, r.group_name')),
    ).toHaveLength(1);
  });
  test('a list of deployments reads the plans of all its deployments in one statement', async () => {
    const deployments = new Deployments(world);
    const agent = await world.issue('list-agent', 'AGENT');
    const deployer = await world.issue('list-deployer', 'DEPLOYER');
    await world.createEnvironment('listed', 'MONOTONIC', false);
    const planIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const [planId] = await deployments.publish('listed', agent);
      planIds.push(planId);
      const started = await deployments.startOk(deployer, 'listed', planId);
      ok(await deployments.finish(deployer, started.id, 'SUCCEEDED'));
    }
    const { statements } = await traced(async () => {
      const result = await app.gql<{ deployments: { plan: { id: string } }[] }>(
        world.admin,
        '{ deployments(environment: "listed") { id plan { id } } }',
      );
      expect(result.errors).toBeUndefined();
      expect(result.data!.deployments.map((d) => d.plan.id).sort()).toEqual([...planIds].sort());
    });
    expect(statements.filter((sql) => /FROM "plans"/.test(sql))).toHaveLength(1);
  });
});
