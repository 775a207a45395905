/**
 * Scenario 6, the storage floor: the statements of one fenced publish (or of its stale
 * rejection), as the guard issues them, straight on better-sqlite3 in this process, one
 * transaction per decision, on a copy of the same prepared database with the same
 * journal and durability settings. No HTTP, no GraphQL, no TypeORM.
 */
import Sqlite from 'better-sqlite3';
import { join } from 'node:path';
import { copyDatabase, removeDatabase, type Template } from './http.js';
import { closedLoop, type Load, type Run } from './measure.js';

export async function runStorageFloor(
  options: Load & {
    template: Template;
    staleShare: 0 | 0.5;
    /**
     * The prototype of fewer statements per accepted publish (7 instead of 11): the admitting
     * UPDATE returns the environment (no read before it), the INSERT computes the sequence and
     * returns the plan (no MAX read, no read after), and one UPDATE turns the published plan
     * SUPERSEDED and the outdated proposals OBSOLETE.
     */
    merged?: boolean;
  },
): Promise<Run> {
  const file = join(options.workDir, `floor-${options.runId}.db`);
  copyDatabase(options.template.file, file);
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.durability}`);
  db.pragma('busy_timeout = 5000');
  const s = {
    recall: db.prepare(
      'SELECT * FROM idempotency_records WHERE principal = :principal AND idempotency_key = :key',
    ),
    environment: db.prepare('SELECT * FROM environments WHERE name = :environment'),
    admit: db.prepare(
      `UPDATE environments SET fence = :generation
       WHERE name = :environment
         AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = :environment
                     AND g.generation = :generation AND g.principal = :principal)
         AND ((mode = 'MONOTONIC' AND fence <= :generation)
           OR (mode = 'STRICT' AND fence = :generation AND lease_generation = :generation
               AND lease_principal = :principal AND lease_expires_at > :now))`,
    ),
    nextSequence: db.prepare(
      `SELECT COALESCE(MAX(sequence), 0) + 1 AS next FROM plans
       WHERE environment = :environment AND generation = :generation`,
    ),
    insertPlan: db.prepare(
      `INSERT INTO plans (id, environment, generation, sequence, status, title, content, content_hash,
         submitted_by, submitted_at, based_on_plan_id, reviewed_by, reviewed_at, rejection_reason,
         published_at, purged_at)
       VALUES (:id, :environment, :generation, :sequence, 'PUBLISHED', NULL, :content, :hash,
         :principal, :now, NULL, NULL, NULL, NULL, :now, NULL)`,
    ),
    movePointer: db.prepare(
      `UPDATE environments SET current_plan_id = :id, current_generation = :generation,
         current_sequence = :sequence
       WHERE name = :environment AND (current_generation < :generation
         OR (current_generation = :generation AND current_sequence < :sequence))`,
    ),
    supersede: db.prepare(
      `UPDATE plans SET status = 'SUPERSEDED'
       WHERE environment = :environment AND status = 'PUBLISHED' AND id <> :id`,
    ),
    markObsolete: db.prepare(
      `UPDATE plans SET status = 'OBSOLETE'
       WHERE environment = :environment AND status = 'PROPOSED'
         AND EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
           AND (plans.generation < e.fence OR plans.generation < e.current_generation
             OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)))`,
    ),
    plan: db.prepare('SELECT * FROM plans WHERE id = :id'),
    admitReturning: db.prepare(
      `UPDATE environments SET fence = :generation
       WHERE name = :environment
         AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = :environment
                     AND g.generation = :generation AND g.principal = :principal)
         AND ((mode = 'MONOTONIC' AND fence <= :generation)
           OR (mode = 'STRICT' AND fence = :generation AND lease_generation = :generation
               AND lease_principal = :principal AND lease_expires_at > :now))
       RETURNING *`,
    ),
    insertReturning: db.prepare(
      `INSERT INTO plans (id, environment, generation, sequence, status, title, content, content_hash,
         submitted_by, submitted_at, based_on_plan_id, reviewed_by, reviewed_at, rejection_reason,
         published_at, purged_at)
       SELECT :environment || '@' || :generation || '.' || (COALESCE(MAX(sequence), 0) + 1),
         :environment, :generation, COALESCE(MAX(sequence), 0) + 1, 'PUBLISHED', NULL, :content, :hash,
         :principal, :now, NULL, NULL, NULL, NULL, :now, NULL
       FROM plans WHERE environment = :environment AND generation = :generation
       RETURNING *`,
    ),
    retire: db.prepare(
      `UPDATE plans SET status = CASE status WHEN 'PUBLISHED' THEN 'SUPERSEDED' ELSE 'OBSOLETE' END
       WHERE environment = :environment AND status IN ('PUBLISHED', 'PROPOSED') AND id <> :id
         AND (status = 'PUBLISHED'
           OR EXISTS (SELECT 1 FROM environments e WHERE e.name = :environment
             AND (plans.generation < e.fence OR plans.generation < e.current_generation
               OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence))))`,
    ),
    grant: db.prepare(
      'SELECT * FROM lease_grants WHERE environment = :environment AND generation = :generation',
    ),
    audit: db.prepare(
      `INSERT INTO audit_events (at, environment, actor, action, generation, plan_id, outcome, code, detail)
       VALUES (:now, :environment, :principal, 'submitPlan', :generation, :id, :outcome, :code, :detail)`,
    ),
    remember: db.prepare(
      `INSERT INTO idempotency_records (principal, idempotency_key, operation, fingerprint, plan_id,
         error_code, error_message, error_details, created_at, expires_at)
       VALUES (:principal, :key, 'submitPlan', :hash, :id, :code, :detail, NULL, :now, :expires)`,
    ),
  };
  const environment = options.template.environments[0];
  const principal = 'bench-agent';
  const hash = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
  let n = 0;
  const decide = db.transaction((generation: number, key: string): string => {
    const now = Date.now();
    const p = { principal, key, environment, generation, now };
    s.recall.get(p);
    if (options.merged) {
      const admitted = s.admitReturning.get(p);
      if (admitted) {
        const plan = s.insertReturning.get({ ...p, content: 'x'.repeat(300), hash }) as {
          id: string;
          sequence: number;
        };
        const q = { ...p, id: plan.id, sequence: plan.sequence };
        s.movePointer.run(q);
        s.retire.run(q);
        s.audit.run({ ...q, outcome: 'ACCEPTED', code: null, detail: null });
        s.remember.run({ ...q, hash, code: null, detail: null, expires: now + 86400_000 });
        return 'ok';
      }
    } else s.environment.get(p);
    if (options.merged || s.admit.run(p).changes !== 1) {
      s.environment.get(p);
      s.grant.get(p);
      const rejection = {
        ...p,
        id: null,
        code: 'STALE_GENERATION',
        hash,
        expires: now + 86400_000,
      };
      s.audit.run({ ...rejection, outcome: 'REJECTED', detail: 'below the fence' });
      s.remember.run({ ...rejection, detail: 'below the fence' });
      return 'STALE_GENERATION';
    }
    const { next } = s.nextSequence.get(p) as { next: number };
    const id = `${environment}@${generation}.${next}`;
    const q = { ...p, id, sequence: next, content: 'x'.repeat(300), hash };
    s.insertPlan.run(q);
    s.movePointer.run(q);
    s.supersede.run(q);
    s.markObsolete.run(q);
    s.plan.get(q);
    s.audit.run({ ...q, outcome: 'ACCEPTED', code: null, detail: null });
    s.remember.run({ ...q, code: null, detail: null, expires: now + 86400_000 });
    return 'ok';
  });
  try {
    const run = await closedLoop(
      options.connections,
      options.seconds,
      () => {
        n++;
        const stale = options.staleShare > 0 && n % 2 === 0;
        const generation = stale ? options.template.stale : options.template.fresh;
        return Promise.resolve(decide(generation, `${options.runId}-${n}`));
      },
      { seconds: options.warmupSeconds },
    );
    return { ...run, peakRssMb: null };
  } finally {
    db.close();
    removeDatabase(file);
  }
}
