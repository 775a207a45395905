import type { Statement } from 'better-sqlite3';
import type { WriterProgram } from '../database/sqlite-writer.js';
import { AFTER_PUBLICATION, MARK_OBSOLETE } from './plan-status.js';
import { admissionStatement, NEXT_SEQUENCE } from './sql.js';

/** A submit as the writer thread takes it: admitPlan's parameters, flat, and what it records. */
export interface SubmitOnThread {
  submit: {
    environment: string;
    principal: string;
    generation: number;
    policyVersion: number;
    basedOnPlanId: string | null;
    title: string | null;
    content: string;
    contentHash: string;
    contentType: string;
    summary: string | null;
    artifact: string | null;
    artifactHash: string | null;
    sourceRevision: string | null;
    /** JSON text, as the plan's column keeps it. */
    policyResults: string | null;
    /** The service's clock when it is not the system's; else the thread reads the system's. */
    now: number | null;
    idempotencyPrincipal: string | null;
    idempotencyKey: string | null;
  };
  /** What the decision adds besides the plan (src/decisions/submit-at-once.ts). */
  record: {
    actor: string;
    data: string[];
    events: { type: string; when: 'always' | 'published' }[];
    audit: Record<'environment' | 'actor' | 'action' | 'outcome', string> &
      Partial<Record<'code' | 'detail' | 'via', string | null>> & { generation?: number | null };
    idempotency: {
      principal: string;
      key: string;
      operation: string;
      fingerprint: string;
      ttlMs: number;
    } | null;
  };
}

/**
 * What the thread decided: `admitted` (stored, and published when `publish`), or nothing
 * written: `remembered` (the call's key has a record), `rejected` (not admitted),
 * `declined` (proposals of the environment have expired, whose announcements read them).
 * Each of those is decided again by the guard's statements, which name the rejection,
 * replay the remembered call, announce the expired proposals.
 */
export type ThreadDecision =
  | { outcome: 'remembered' | 'rejected' | 'declined'; now: number }
  | {
      outcome: 'admitted';
      now: number;
      publish: boolean;
      sequence: number;
      ttlSeconds: number | null;
      auditId: number;
    };

/** A call remembered (R9): with the plan its submit stored, or the refusal it got. */
const REMEMBER_CALL = `INSERT INTO idempotency_records (principal, idempotency_key, operation,
  fingerprint, plan_id, error_code, error_message, error_details, created_at, expires_at)
  VALUES (:principal, :key, :operation, :fingerprint, :planId, :errorCode, :errorMessage,
  :errorDetails, :now, :expiresAt)`;

/**
 * SQLite: the common submit (PlanWrites.decidesInOneStatement, in an environment without
 * required checks or promotion) decided by the writer thread, by admitPlan's statements in
 * admitPlan's order (the admission is one conditional UPDATE whose affected row decides,
 * R2), and recorded with what the decision adds as the decision runner would record it
 * (`record`: the plan's events, the audit event, the idempotency record), as PostgreSQL's
 * planfence_submit_plan_at_once does in one statement. It runs in the thread's transaction,
 * in a savepoint of its own; it writes nothing unless it admits.
 */
export const SUBMIT_ON_THREAD: WriterProgram<SubmitOnThread, ThreadDecision> = {
  name: 'submitPlan',
  sql: {
    remembered: `SELECT 1 AS found FROM idempotency_records
      WHERE principal = :idempotencyPrincipal AND idempotency_key = :idempotencyKey`,
    environment: `SELECT require_approval, proposal_ttl_seconds FROM environments
      WHERE name = :environment`,
    expiring: `SELECT 1 AS found FROM plans WHERE environment = :environment
      AND status = 'PROPOSED' AND expires_at <= :now LIMIT 1`,
    admit: admissionStatement({
      publish: false,
      casOnPointer: false,
      casOnSequence: false,
      casOnState: false,
    }),
    admitToPublish: admissionStatement({
      publish: true,
      casOnPointer: false,
      casOnSequence: false,
      casOnState: false,
    }),
    admitToPublishOnPointer: admissionStatement({
      publish: true,
      casOnPointer: true,
      casOnSequence: false,
      casOnState: false,
    }),
    nextSequence: NEXT_SEQUENCE,
    insertPlan: `INSERT INTO plans (id, environment, generation, sequence, status, title,
      content, content_hash, submitted_by, submitted_at, based_on_plan_id, published_at,
      expires_at, content_type, summary, artifact, artifact_hash, source_revision,
      policy_version, policy_results)
      VALUES (:id, :environment, :generation, :sequence, :status, :title, :content,
      :contentHash, :principal, :now, :basedOnPlanId, :publishedAt, :expiresAt, :contentType,
      :summary, :artifact, :artifactHash, :sourceRevision, :policyVersion, :policyResults)`,
    movePointer: `UPDATE environments SET current_plan_id = :id,
      current_generation = :generation, current_sequence = :sequence
      WHERE name = :environment`,
    supersede: AFTER_PUBLICATION[0],
    passOver: AFTER_PUBLICATION[1],
    markObsolete: MARK_OBSOLETE,
    outbox: `INSERT INTO outbox_events (environment, type, at, generation, sequence, plan_id,
      deployment_sequence, actor, data)
      VALUES (:environment, :type, :now, :generation, :sequence, :id, NULL, :actor, :data)`,
    audit: `INSERT INTO audit_events (at, environment, actor, action, generation, plan_id,
      outcome, code, detail, via)
      VALUES (:now, :environment, :actor, :action, :generation, :id, :outcome, :code,
      :detail, :via)`,
    remember: REMEMBER_CALL,
  },
  // Self-contained: it runs in the writer thread from its source text.
  run: (statement: (sql: string) => Statement, sql: Record<string, string>, input) => {
    const { submit: p, record } = input;
    const now = p.now ?? Date.now();
    const at = { ...p, now };
    if (p.idempotencyKey !== null && statement(sql.remembered).get(at)) {
      return { outcome: 'remembered', now };
    }
    const env = statement(sql.environment).get(at) as
      { require_approval: number; proposal_ttl_seconds: number | null } | undefined;
    if (!env) return { outcome: 'rejected', now };
    if (statement(sql.expiring).get(at)) return { outcome: 'declined', now };
    const publish = !env.require_approval;
    const admission = !publish
      ? sql.admit
      : p.basedOnPlanId === null
        ? sql.admitToPublish
        : sql.admitToPublishOnPointer;
    if (statement(admission).run(at).changes === 0) {
      return { outcome: 'rejected', now };
    }
    const { next } = statement(sql.nextSequence).get(at) as { next: number };
    const id = `${p.environment}@${p.generation}.${next}`;
    const ttlSeconds = env.proposal_ttl_seconds;
    const expiresAt = !publish && ttlSeconds !== null ? now + ttlSeconds * 1000 : null;
    const status = publish ? 'PUBLISHED' : 'PROPOSED';
    statement(sql.insertPlan).run({
      ...at,
      id,
      sequence: next,
      status,
      publishedAt: publish ? now : null,
      expiresAt,
    });
    const plan = { id, environment: p.environment, generation: p.generation, sequence: next };
    if (publish) {
      statement(sql.movePointer).run(plan);
      statement(sql.supersede).run(plan);
      statement(sql.passOver).run(plan);
    } else {
      statement(sql.markObsolete).run(plan);
    }
    // The leaves of the record's templates, as JSON text (src/database/json-text.ts).
    const iso = (millis: number | null) =>
      millis === null ? 'null' : JSON.stringify(new Date(millis).toISOString());
    const leaves: Record<string, string> = {
      id: JSON.stringify(id),
      sequence: String(next),
      status: JSON.stringify(status),
      submittedAtIso: iso(now),
      publishedAtIso: iso(publish ? now : null),
      expiresAtIso: iso(expiresAt),
    };
    const data = record.data.map((part, i) => (i % 2 === 0 ? part : leaves[part])).join('');
    for (const { type, when } of record.events) {
      if (when === 'published' && !publish) continue;
      statement(sql.outbox).run({ ...plan, type, now, actor: record.actor, data });
    }
    const { audit } = record;
    const auditId = Number(
      statement(sql.audit).run({
        now,
        environment: audit.environment,
        actor: audit.actor,
        action: audit.action,
        generation: audit.generation ?? null,
        id,
        outcome: audit.outcome,
        code: audit.code ?? null,
        detail: audit.detail ?? null,
        via: audit.via ?? null,
      }).lastInsertRowid,
    );
    const call = record.idempotency;
    if (call) {
      statement(sql.remember).run({
        principal: call.principal,
        key: call.key,
        operation: call.operation,
        fingerprint: call.fingerprint,
        planId: id,
        errorCode: null,
        errorMessage: null,
        errorDetails: null,
        now,
        expiresAt: now + call.ttlMs,
      });
    }
    return { outcome: 'admitted', now, publish, sequence: next, ttlSeconds, auditId };
  },
};

/** A submit of a generation below the fence, as the writer thread takes it. */
export interface RefusalOnThread {
  environment: string;
  principal: string;
  generation: number;
  policyVersion: number;
  /** The fence the refusal names: the thread refuses only while it is the environment's. */
  fence: number;
  now: number;
  idempotencyPrincipal: string | null;
  idempotencyKey: string | null;
  /** The refusal's audit event, without its id and time. */
  audit: Record<'environment' | 'actor' | 'action' | 'outcome' | 'code' | 'detail', string> & {
    generation: number;
    via: string | null;
  };
  /** The call to remember with the refusal (R9), if it has an idempotency key. */
  idempotency: {
    principal: string;
    key: string;
    operation: string;
    fingerprint: string;
    ttlMs: number;
    errorCode: string;
    errorMessage: string;
    errorDetails: string;
  } | null;
}

/** `refused` (its audit event and remembered call recorded), or `declined` (nothing written). */
export type ThreadRefusal = { outcome: 'refused'; auditId: number } | { outcome: 'declined' };

/**
 * SQLite: R4's refusal of a common submit (as SUBMIT_ON_THREAD takes it) whose generation is
 * below the fence, made by the writer thread: one conditional INSERT of the refusal's audit
 * event, which writes the row only if the submit would be refused STALE_GENERATION below
 * `fence` now, the affected row deciding (R2): the environment is at the policy version the
 * submit was decided at, the generation was issued to the caller (else the refusal would be
 * UNKNOWN_GENERATION), and `fence` is the environment's fence and above the generation.
 * With it, the call's remembered refusal (R9). Anything else (the fence moved, a remembered
 * call) is declined with nothing written, and decided by the guard's statements.
 */
export const REFUSE_STALE_ON_THREAD: WriterProgram<RefusalOnThread, ThreadRefusal> = {
  name: 'refuseStale',
  sql: {
    remembered: SUBMIT_ON_THREAD.sql.remembered,
    refuse: `INSERT INTO audit_events (at, environment, actor, action, generation, plan_id,
      outcome, code, detail, via)
      SELECT :now, :auditEnvironment, :actor, :action, :generation, NULL, :outcome, :code,
        :detail, :via
      FROM environments e
      WHERE e.name = :environment AND e.policy_version = :policyVersion
        AND e.fence = :fence AND :generation < e.fence
        AND EXISTS (SELECT 1 FROM lease_grants g WHERE g.environment = :environment
                    AND g.generation = :generation AND g.principal = :principal)`,
    remember: REMEMBER_CALL,
  },
  // Self-contained: it runs in the writer thread from its source text.
  run: (statement: (sql: string) => Statement, sql: Record<string, string>, p) => {
    if (p.idempotencyKey !== null && statement(sql.remembered).get(p)) {
      return { outcome: 'declined' };
    }
    const { audit } = p;
    const refused = statement(sql.refuse).run({
      now: p.now,
      environment: p.environment,
      principal: p.principal,
      generation: p.generation,
      policyVersion: p.policyVersion,
      fence: p.fence,
      auditEnvironment: audit.environment,
      actor: audit.actor,
      action: audit.action,
      outcome: audit.outcome,
      code: audit.code,
      detail: audit.detail,
      via: audit.via,
    });
    if (refused.changes === 0) return { outcome: 'declined' };
    const call = p.idempotency;
    if (call) {
      statement(sql.remember).run({
        principal: call.principal,
        key: call.key,
        operation: call.operation,
        fingerprint: call.fingerprint,
        planId: null,
        errorCode: call.errorCode,
        errorMessage: call.errorMessage,
        errorDetails: call.errorDetails,
        now: p.now,
        expiresAt: p.now + call.ttlMs,
      });
    }
    return { outcome: 'refused', auditId: Number(refused.lastInsertRowid) };
  },
};
