/**
 * History for the growth scenario, written straight into the migrated schema of a stopped
 * service's database: `plans` plans in the environment (a hundred per generation, each
 * granted to the bench agent and each with its audit event), the last one published and
 * the others superseded, as an environment that has been publishing for a long time.
 */
import Sqlite from 'better-sqlite3';

const PER_GENERATION = 100;

export function seedHistory(file: string, environment: string, plans: number): void {
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const grant = db.prepare(
    `INSERT INTO lease_grants (environment, generation, principal, holder, acquired_at)
     VALUES (?, ?, 'bench-agent', 'bench-agent/history', ?)`,
  );
  const plan = db.prepare(
    `INSERT INTO plans (id, environment, generation, sequence, status, title, content, content_hash,
       submitted_by, submitted_at, based_on_plan_id, reviewed_by, reviewed_at, rejection_reason,
       published_at, purged_at)
     VALUES (?, ?, ?, ?, ?, NULL, ?, ?, 'bench-agent', ?, NULL, NULL, NULL, NULL, ?, NULL)`,
  );
  const audit = db.prepare(
    `INSERT INTO audit_events (at, environment, actor, action, generation, plan_id, outcome, code, detail)
     VALUES (?, ?, 'bench-agent', 'submitPlan', ?, ?, 'ACCEPTED', NULL, NULL)`,
  );
  const content = 'h'.repeat(300);
  const hash = 'a'.repeat(64);
  const start = Date.now() - plans * 1000;
  let last = { id: '', generation: 0, sequence: 0 };
  db.transaction(() => {
    for (let i = 0; i < plans; i++) {
      const generation = Math.floor(i / PER_GENERATION) + 1;
      const sequence = (i % PER_GENERATION) + 1;
      const at = start + i * 1000;
      if (sequence === 1) grant.run(environment, generation, at);
      const id = `${environment}@${generation}.${sequence}`;
      const status = i === plans - 1 ? 'PUBLISHED' : 'SUPERSEDED';
      plan.run(id, environment, generation, sequence, status, content, hash, at, at);
      audit.run(at, environment, generation, id);
      last = { id, generation, sequence };
    }
    db.prepare(
      `UPDATE environments SET last_issued_generation = ?, fence = ?, current_plan_id = ?,
         current_generation = ?, current_sequence = ? WHERE name = ?`,
    ).run(last.generation, last.generation, last.id, last.generation, last.sequence, environment);
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}
