import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Sets v_plan: the plan the decision stored, as this migration first found it. */
export const FIRST_FIND_PLAN = `  SELECT * INTO STRICT v_plan FROM plans WHERE environment = p_environment
    AND generation = p_generation AND sequence = CAST(v_decision->>'sequence' AS integer);`;

/** The CREATE OR REPLACE of planfence_submit_plan_at_once, finding the stored plan by `findPlan`. */
export function submitAtOnceFunction(findPlan: string): string {
  return `CREATE OR REPLACE FUNCTION planfence_submit_plan_at_once(
  p_environment text, p_principal text, p_generation integer, p_policy_version integer,
  p_based_on_plan_id text, p_based_on_deployment_sequence integer, p_title text,
  p_content text, p_content_hash text, p_content_type text, p_summary text,
  p_artifact text, p_artifact_hash text, p_source_revision text, p_policy_results text,
  p_now bigint, p_idempotency_principal text, p_idempotency_key text, p_record jsonb
) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_decision jsonb;
  v_plan plans%ROWTYPE;
  v_now bigint;
  v_audit_id integer;
  v_published boolean;
  v_leaves jsonb;
  v_item jsonb;
  v_candidate jsonb;
  v_audit jsonb := p_record->'audit';
  v_call jsonb := p_record->'idempotency';
  v_payload text;
  v_data text;
BEGIN
  v_decision := planfence_submit_plan(p_environment, p_principal, p_generation,
    p_policy_version, p_based_on_plan_id, p_based_on_deployment_sequence, p_title, p_content,
    p_content_hash, p_content_type, p_summary, p_artifact, p_artifact_hash, p_source_revision,
    p_policy_results, p_now, p_idempotency_principal, p_idempotency_key);
  -- Nothing was written: the service decides it again, by the statement that answers.
  IF v_decision->>'outcome' <> 'admitted' THEN
    RETURN v_decision;
  END IF;
  -- Written, but the expired proposals' announcements read them: nothing of it may commit.
  IF jsonb_array_length(v_decision->'expired') > 0 THEN
    RAISE EXCEPTION 'the submit is decided by the guard''s statements'
      USING ERRCODE = 'PF409', DETAIL = v_decision::text;
  END IF;

${findPlan}
  v_now := CAST(v_decision->>'now' AS bigint);
  v_audit_id := CAST(v_decision->>'auditId' AS integer);
  v_published := v_plan.status = 'PUBLISHED';
  -- Each leaf as JSON text; dates as milliseconds, and as the ISO text JSON.stringify writes.
  v_leaves := jsonb_build_object(
    'id', CAST(to_json(v_plan.id) AS text),
    'sequence', CAST(v_plan.sequence AS text),
    'status', CAST(to_json(v_plan.status) AS text),
    'submittedAt', CAST(v_plan.submitted_at AS text),
    'publishedAt', COALESCE(CAST(v_plan.published_at AS text), 'null'),
    'expiresAt', COALESCE(CAST(v_plan.expires_at AS text), 'null'),
    'submittedAtIso', '"' || planfence_iso_millis(v_plan.submitted_at) || '"',
    'publishedAtIso', COALESCE('"' || planfence_iso_millis(v_plan.published_at) || '"', 'null'),
    'expiresAtIso', COALESCE('"' || planfence_iso_millis(v_plan.expires_at) || '"', 'null'),
    'now', CAST(v_now AS text),
    'auditId', CAST(v_audit_id AS text));

  v_data := planfence_fill(p_record->'data', v_leaves);
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_record->'events') LOOP
    CONTINUE WHEN v_item->>'when' = 'published' AND NOT v_published;
    INSERT INTO outbox_events (environment, type, at, generation, sequence, plan_id,
      deployment_sequence, actor, data)
    VALUES (v_plan.environment, v_item->>'type', v_now, v_plan.generation, v_plan.sequence,
      v_plan.id, NULL, p_record->>'actor', v_data);
  END LOOP;

  INSERT INTO audit_events (id, at, environment, actor, action, generation, plan_id, outcome,
    code, detail, via)
  VALUES (v_audit_id, v_now, v_audit->>'environment', v_audit->>'actor', v_audit->>'action',
    CAST(v_audit->>'generation' AS integer), v_plan.id, v_audit->>'outcome', v_audit->>'code',
    v_audit->>'detail', v_audit->>'via');

  IF jsonb_typeof(v_call) = 'object' THEN
    INSERT INTO idempotency_records (principal, idempotency_key, operation, fingerprint,
      plan_id, deployment_id, error_code, error_message, error_details, created_at, expires_at)
    VALUES (v_call->>'principal', v_call->>'key', v_call->>'operation', v_call->>'fingerprint',
      v_plan.id, NULL, NULL, NULL, NULL, v_now, v_now + CAST(v_call->>'ttlMs' AS bigint));
  END IF;

  FOR v_item IN SELECT value FROM jsonb_array_elements(p_record->'notifications') LOOP
    CONTINUE WHEN v_item->>'when' = 'published' AND NOT v_published;
    FOR v_candidate IN SELECT value FROM jsonb_array_elements(v_item->'candidates') LOOP
      v_payload := planfence_fill(v_candidate, v_leaves);
      EXIT WHEN octet_length(v_payload) <= 7999;
    END LOOP;
    PERFORM pg_notify(p_record->>'channel', v_payload);
  END LOOP;

  RETURN v_decision;
END
$fn$`;
}

/**
 * PostgreSQL: a submit decided and recorded by one statement, for a transaction that sends
 * it with its COMMIT without waiting for its answer (src/decisions/submit-at-once.ts).
 *
 * `planfence_submit_plan_at_once` takes `planfence_submit_plan`'s arguments (and decides by
 * it: the same rules, the same answer) and `p_record`, what the decision adds besides the
 * plan as the service's encoders wrote it: the plan's events, the audit event, the
 * idempotency record and the notifications. What only the decision knows (the plan's id,
 * sequence, status and dates, its clock, its audit event's id) is left in their JSON texts
 * as named leaves, which `planfence_fill` fills in from the stored plan. So this function
 * encodes nothing itself: it fills, inserts the rows in the tables' columns, and notifies.
 *
 * It does so only for an admitted submit that expired no proposal (the common one). A
 * rejection or a remembered call wrote nothing: it returns the decision, records nothing,
 * and the service decides the submit again by `planfence_submit_plan`, whose answer it reads
 * before adding what follows (naming the rejection, recalling the remembered outcome). An
 * admission that expired proposals raises SQLSTATE PF409 (its detail is the decision): the
 * transaction rolls back with nothing written, and the service decides it again the same
 * way, announcing the expired proposals.
 *
 * A text template is a JSON array of strings: literal text and leaf names, alternating,
 * starting and ending with literal text. `p_record`:
 * { actor, channel, data: template (the plan's events' data),
 *   events: [{ type, when: 'always' | 'published' }],
 *   audit: { environment, actor, action, generation, outcome, code, detail, via },
 *   idempotency: null | { principal, key, operation, fingerprint, ttlMs },
 *   notifications: [{ when, candidates: [template, …] }] }: a notification's payload is
 *   its first candidate of at most 7999 bytes, else its last.
 * Both functions are PL/pgSQL, whose statements' plans each connection keeps.
 */
export class SubmitAtOnce1765800000000 implements MigrationInterface {
  name = 'SubmitAtOnce1765800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(`
CREATE OR REPLACE FUNCTION planfence_iso_millis(p_millis bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT to_char(to_timestamp(p_millis / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || '.' || lpad(CAST(p_millis % 1000 AS text), 3, '0') || 'Z'
$fn$`);
    await queryRunner.query(`
CREATE OR REPLACE FUNCTION planfence_fill(p_template jsonb, p_leaves jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
  v_text text := '';
BEGIN
  FOR i IN 0 .. jsonb_array_length(p_template) - 1 LOOP
    IF i % 2 = 0 THEN
      v_text := v_text || (p_template->>i);
    ELSE
      v_text := v_text || (p_leaves->>(p_template->>i));
    END IF;
  END LOOP;
  RETURN v_text;
END
$fn$`);
    await queryRunner.query(submitAtOnceFunction(FIRST_FIND_PLAN));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query(
      `DROP FUNCTION IF EXISTS planfence_submit_plan_at_once(text, text, integer, integer, text,
        integer, text, text, text, text, text, text, text, text, text, bigint, text, text, jsonb)`,
    );
    await queryRunner.query('DROP FUNCTION IF EXISTS planfence_fill(jsonb, jsonb)');
    await queryRunner.query('DROP FUNCTION IF EXISTS planfence_iso_millis(bigint)');
  }
}
