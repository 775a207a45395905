import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The statements of planfence_submit_plan that later migrations write differently. */
export interface SubmitPlanStatements {
  /** Sets v_sequence: the next sequence of the plans of p_generation. */
  nextSequence: string;
  /** R8 when it publishes: the plan published before SUPERSEDED, the proposals passed over OBSOLETE. */
  supersede: string;
}

/** As this migration wrote them. */
export const FIRST_STATEMENTS: SubmitPlanStatements = {
  nextSequence: `  SELECT COALESCE(MAX(p.sequence), 0) + 1 INTO v_sequence FROM plans p
  WHERE p.environment = p_environment AND p.generation = p_generation;`,
  supersede: `    UPDATE plans SET status = CASE WHEN status = 'PUBLISHED' THEN 'SUPERSEDED' ELSE 'OBSOLETE' END
    WHERE environment = p_environment AND status IN ('PUBLISHED', 'PROPOSED')
      AND ((status = 'PUBLISHED' AND id <> v_id) OR (status = 'PROPOSED'
        AND EXISTS (SELECT 1 FROM environments e WHERE e.name = p_environment
          AND (plans.generation < e.fence OR plans.generation < e.current_generation
            OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)))));`,
};

/** The CREATE OR REPLACE of planfence_submit_plan, with these statements. */
export function submitPlanFunction(statements: SubmitPlanStatements): string {
  return `CREATE OR REPLACE FUNCTION planfence_submit_plan(
  p_environment text, p_principal text, p_generation integer, p_policy_version integer,
  p_based_on_plan_id text, p_based_on_deployment_sequence integer, p_title text,
  p_content text, p_content_hash text, p_content_type text, p_summary text,
  p_artifact text, p_artifact_hash text, p_source_revision text, p_policy_results text,
  p_now bigint, p_idempotency_principal text, p_idempotency_key text
) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_now bigint := COALESCE(p_now, floor(extract(epoch from clock_timestamp()) * 1000)::bigint);
  v_require_approval boolean;
  v_ttl integer;
  v_publish boolean;
  v_sequence integer;
  v_id text;
  v_expired text[];
BEGIN
  IF p_idempotency_key IS NOT NULL AND EXISTS (SELECT 1 FROM idempotency_records r
      WHERE r.principal = p_idempotency_principal AND r.idempotency_key = p_idempotency_key) THEN
    RETURN jsonb_build_object('outcome', 'remembered', 'now', v_now);
  END IF;

  SELECT e.require_approval, e.proposal_ttl_seconds INTO v_require_approval, v_ttl
  FROM environments e WHERE e.name = p_environment;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('outcome', 'rejected', 'now', v_now, 'publish', false);
  END IF;
  v_publish := NOT v_require_approval;

  -- R3, R4, R5 (R17, R33 and the pointer's compare-and-swap when it publishes), R34.
  UPDATE environments e SET fence = p_generation
  WHERE e.name = p_environment AND e.policy_version = p_policy_version
    AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = p_environment
                AND g.generation = p_generation AND g.principal = p_principal)
    AND ((e.mode = 'MONOTONIC' AND e.fence <= p_generation)
      OR (e.mode = 'STRICT' AND e.fence = p_generation AND e.lease_generation = p_generation
          AND e.lease_principal = p_principal AND e.lease_expires_at > v_now))
    AND (NOT v_publish OR p_based_on_plan_id IS NULL OR e.current_plan_id = p_based_on_plan_id)
    AND (NOT v_publish OR p_based_on_deployment_sequence IS NULL
         OR e.deployment_sequence = p_based_on_deployment_sequence)
    AND (NOT v_publish OR e.frozen_at IS NULL);
  IF NOT FOUND THEN
    RETURN jsonb_build_object('outcome', 'rejected', 'now', v_now, 'publish', v_publish);
  END IF;

  -- R16
  WITH expired AS (
    UPDATE plans SET status = 'EXPIRED'
    WHERE status = 'PROPOSED' AND expires_at <= v_now AND environment = p_environment
    RETURNING id)
  SELECT array_agg(id ORDER BY id) INTO v_expired FROM expired;

${statements.nextSequence}
  v_id := p_environment || '@' || p_generation || '.' || v_sequence;

  INSERT INTO plans (id, environment, generation, sequence, status, title, content,
    content_hash, content_type, summary, artifact, artifact_hash,
    based_on_deployment_sequence, source_revision, submitted_by, submitted_at,
    based_on_plan_id, reviewed_by, reviewed_at, rejection_reason, published_at, purged_at,
    expires_at, policy_version, policy_results)
  VALUES (v_id, p_environment, p_generation, v_sequence,
    CASE WHEN v_publish THEN 'PUBLISHED' ELSE 'PROPOSED' END, p_title, p_content,
    p_content_hash, p_content_type, p_summary, p_artifact, p_artifact_hash,
    p_based_on_deployment_sequence, p_source_revision, p_principal, v_now,
    p_based_on_plan_id, NULL, NULL, NULL, CASE WHEN v_publish THEN v_now END, NULL,
    CASE WHEN NOT v_publish AND v_ttl IS NOT NULL THEN v_now + v_ttl * 1000 END,
    p_policy_version, p_policy_results);

  IF v_publish THEN
    -- Forward by admission: the held row's fence is this generation, whose plans all come
    -- before the new sequence.
    UPDATE environments SET current_plan_id = v_id, current_generation = p_generation,
      current_sequence = v_sequence
    WHERE name = p_environment;
    -- R8: the published plan before it SUPERSEDED, the proposals passed over OBSOLETE.
${statements.supersede}
  ELSE
    -- R8: never the new plan, of the fence's generation and after the current plan.
    UPDATE plans SET status = 'OBSOLETE'
    WHERE environment = p_environment AND status = 'PROPOSED'
      AND EXISTS (SELECT 1 FROM environments e WHERE e.name = p_environment
        AND (plans.generation < e.fence OR plans.generation < e.current_generation
          OR (plans.generation = e.current_generation AND plans.sequence < e.current_sequence)));
  END IF;

  RETURN jsonb_build_object('outcome', 'admitted', 'now', v_now, 'publish', v_publish,
    'sequence', v_sequence, 'ttlSeconds', v_ttl, 'expired', COALESCE(to_jsonb(v_expired), '[]'::jsonb),
    'auditId', nextval(pg_get_serial_sequence('audit_events', 'id')));
END
$fn$`;
}

/**
 * PostgreSQL: a plan's submit decided by one statement (src/fencing/plan-writes.ts,
 * `submitInOneStatement`): the same rules as the guard's statements (R3–R5, R8, R16, R17,
 * R33, R34), in the same order and with the same conditions, run by the database in one
 * round trip instead of one per statement. The admission is one conditional UPDATE whose
 * affected row decides (R2); every statement after it runs only when it admitted. Each
 * statement of a PL/pgSQL function takes its own snapshot (READ COMMITTED), so the statements
 * after the admission see every transaction that held the environment's row before it.
 *
 * It decides only a submit whose policies add no rules and deny nothing (the common one);
 * others run the guard's statements. Its result names the outcome: `remembered` (the call's
 * idempotency key has a record: nothing was decided), `rejected` (nothing was written: the
 * guard's reads name why), `admitted` (the plan is stored, and published when `publish`).
 * It also returns the clock it decided by (`now`; the database's unless given), the expired
 * proposals' ids and the id of the decision's audit event, taken after the admission holds
 * the environment's row so that an environment's audit ids grow in decision order.
 */
export class SubmitInOneStatement1765500000000 implements MigrationInterface {
  name = 'SubmitInOneStatement1765500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(submitPlanFunction(FIRST_STATEMENTS));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(
      `DROP FUNCTION IF EXISTS planfence_submit_plan(text, text, integer, integer, text, integer,
        text, text, text, text, text, text, text, text, text, bigint, text, text)`,
    );
  }
}
