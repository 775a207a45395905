import { AuditOutcome } from '../model/audit-event.entity.js';
import { type AuditEntry, auditEvent } from '../audit/audit.service.js';
import { JsonLeaf, jsonTemplate } from '../database/json-text.js';
import { type EventKind, wireCandidates } from '../events/event-wire.js';
import { EVENTS_CHANNEL } from '../events/events.service.js';
import { DECIDED_PLAN_FIELDS } from '../fencing/plan-writes.js';
import type { IdempotentCall } from '../idempotency/idempotency.service.js';
import { planData } from '../outbox/outbox.service.js';
import type { Plan } from '../model/plan.entity.js';

/** What an admitted submit records besides the plan, but for what the database decides. */
export interface SubmitRecord {
  /** The accepted decision's audit event, without its plan id, id and time. */
  audit: Omit<AuditEntry, 'planId' | 'outcome' | 'code'>;
  /** The call to remember (R9), if it has an idempotency key. */
  call: IdempotentCall | null;
  idempotencyTtlMs: number;
  /** Whether the record carries the notifications (PostgreSQL's; SQLite announces in the service). */
  notifications?: boolean;
}

/**
 * PostgreSQL: what an admitted submit adds besides its plan, for planfence_submit_plan_at_once
 * to record in the decision's own statement (see its migration): the same rows and
 * notifications, byte for byte, as the decision runner makes of the guard's effects after
 * admitPlan, written here by the same encoders, with what the database decides
 * (DECIDED_PLAN_FIELDS, the clock, the audit event's id) left as leaves it fills in:
 * - plan.submitted, and plan.published when it published, in the outbox (planEvent);
 * - the accepted decision's audit event, with the id the decision drew;
 * - the idempotency record of the call, if it has a key;
 * - the planPublished notification when it published, then the audit event's.
 * `provisional` is the plan as stored but for the fields the database decides.
 */
export function submitRecord(provisional: Plan, record: SubmitRecord): object {
  const { audit, call } = record;
  // Its id, time and plan id are the database's leaves (below).
  const event = auditEvent(0, { ...audit, outcome: AuditOutcome.ACCEPTED });
  return {
    actor: provisional.submittedBy,
    channel: EVENTS_CHANNEL,
    data: jsonTemplate(decided(planData(provisional), 'iso')),
    events: [
      { type: 'plan.submitted', when: 'always' },
      { type: 'plan.published', when: 'published' },
    ],
    audit: {
      environment: event.environment,
      actor: event.actor,
      action: event.action,
      generation: event.generation,
      outcome: event.outcome,
      code: event.code,
      detail: event.detail,
      via: event.via,
    },
    idempotency: call && {
      principal: call.principal,
      key: call.key,
      operation: call.operation,
      fingerprint: call.fingerprint,
      ttlMs: record.idempotencyTtlMs,
    },
    // In the order the runner makes them: the plan's effects, then the audit event's.
    notifications:
      record.notifications === false
        ? []
        : [
            { when: 'published', candidates: wire('plan', provisional) },
            {
              when: 'always',
              candidates: wire('audit', event, {
                id: new JsonLeaf('auditId'),
                at: new JsonLeaf('now'),
                planId: new JsonLeaf('id'),
              }),
            },
          ],
  };
}

/** `fields` with leaves for the plan fields the database decides: dates as ISO text or milliseconds. */
function decided(fields: Record<string, unknown>, dates: 'iso' | 'millis') {
  const out = { ...fields };
  for (const [field, { date }] of Object.entries(DECIDED_PLAN_FIELDS)) {
    if (field in out) out[field] = new JsonLeaf(date && dates === 'iso' ? `${field}Iso` : field);
  }
  return out;
}

/**
 * The templates of the payloads `encode` may write for `object`, in its order of preference,
 * with leaves (`leaves`, or a plan's decided fields).
 */
function wire(kind: EventKind, object: object, leaves?: Record<string, JsonLeaf>): string[][] {
  const withLeaves = (row: Record<string, unknown>) =>
    leaves
      ? { ...row, ...Object.fromEntries(Object.entries(leaves).filter(([f]) => f in row)) }
      : decided(row, 'millis');
  return wireCandidates(kind, object).map((candidate) =>
    jsonTemplate(
      'row' in candidate
        ? { ...candidate, row: withLeaves(candidate.row) }
        : { ...candidate, id: withLeaves({ id: candidate.id }).id },
    ),
  );
}
