import { AuditEvent } from '../model/audit-event.entity.js';
import { Deployment } from '../model/deployment.entity.js';
import {
  Plan,
  PLAN_FIELDS_BUT_CONTENT,
  PLAN_LARGE_FIELDS,
  PlanStatus,
} from '../model/plan.entity.js';

/**
 * How a subscription event travels between instances as a PostgreSQL notification payload
 * (shorter than 8000 bytes): the object's fields as they were when the deciding
 * transaction ran, so that every instance rebuilds the very object the event announced.
 *
 * - A plan travels without its `content`, `summary` and `artifact` (immutable, up to
 *   PLANFENCE_MAX_PLAN_BYTES or PLANFENCE_MAX_ARTIFACT_BYTES), read by id only when a
 *   subscriber selects them; its approvals are final once it is published
 *   and are read by id as for any plan.
 * - When the fields do not fit, the large text fields that never change once written (an
 *   audit event's `detail`; a deployment's `detail` and `reconcileNote`, written only by the
 *   finish or reconcile that ends it) are left out and read by id when selected.
 * - When even that does not fit, only the id travels and the row is read when the
 *   notification arrives (a plan then still reads PUBLISHED, what its event announced).
 */
export type EventKind = 'plan' | 'audit' | 'deployment';

export type Wire =
  | { k: EventKind; row: Record<string, unknown>; lazy?: string[] }
  | { k: EventKind; id: string | number };

/** NOTIFY refuses a payload of 8000 bytes or more. */
export const MAX_PAYLOAD_BYTES = 7999;

const DATES: Record<EventKind, string[]> = {
  plan: ['submittedAt', 'reviewedAt', 'publishedAt', 'expiresAt', 'purgedAt'],
  audit: ['at'],
  deployment: ['startedAt', 'heartbeatExpiresAt', 'finishedAt'],
};

/** Fields that never travel (read by id when selected). */
const ALWAYS_LAZY: Record<EventKind, string[]> = {
  plan: Object.keys(PLAN_LARGE_FIELDS),
  audit: [],
  deployment: [],
};

/** Write-once text fields left out when the event would not fit otherwise. */
const LARGE: Record<EventKind, string[]> = {
  plan: ['title'],
  audit: ['detail'],
  deployment: ['detail', 'reconcileNote'],
};

/** Entity fields (a plan's approval snapshot is not one: approvals are read by id). */
const FIELDS: Record<EventKind, string[]> = {
  plan: [...PLAN_FIELDS_BUT_CONTENT, ...Object.keys(PLAN_LARGE_FIELDS)],
  audit: [
    'id',
    'at',
    'environment',
    'actor',
    'action',
    'generation',
    'planId',
    'outcome',
    'code',
    'detail',
    'via',
  ],
  deployment: [
    'id',
    'environment',
    'sequence',
    'planId',
    'status',
    'startedBy',
    'startedAt',
    'heartbeatExpiresAt',
    'finishedAt',
    'detail',
    'reconciledBy',
    'reconcileNote',
  ],
};

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * The payloads that may announce `object` (an entity of `kind`), in the order `encode`
 * prefers them: its fields; its fields but the large write-once ones that are set; its id.
 */
export function wireCandidates(kind: EventKind, object: object): [Wire, Wire, Wire] {
  const source = object as Record<string, unknown>;
  const row: Record<string, unknown> = {};
  const lazy = [...ALWAYS_LAZY[kind]];
  for (const field of FIELDS[kind]) {
    if (lazy.includes(field)) continue;
    const value = source[field];
    row[field] = value instanceof Date ? value.getTime() : (value ?? null);
  }
  const smaller = { ...row };
  const smallerLazy = [...lazy];
  for (const field of LARGE[kind]) {
    if (row[field] == null) continue;
    delete smaller[field];
    smallerLazy.push(field);
  }
  return [
    { k: kind, row, lazy },
    { k: kind, row: smaller, lazy: smallerLazy },
    { k: kind, id: source.id as string | number },
  ];
}

/** The payload announcing `object` (an entity of `kind`): the first candidate that fits. */
export function encode(kind: EventKind, object: object): string {
  const [full, smaller, id] = wireCandidates(kind, object);
  for (const wire of [full, smaller]) {
    const text = JSON.stringify(wire);
    if (bytes(text) <= MAX_PAYLOAD_BYTES) return text;
  }
  return JSON.stringify(id);
}

/** Reads `field` of the row `id` of `kind` (a field that was left out of a payload). */
export type FieldReader = (kind: EventKind, id: string | number, field: string) => Promise<unknown>;

/**
 * The object a payload announced, with the fields left out read by id, once, when a
 * subscriber's selection first reads them (the value is a promise, which GraphQL awaits).
 */
export function rebuild(
  wire: Extract<Wire, { row: unknown }>,
  read: FieldReader,
): Plan | AuditEvent | Deployment {
  const object = blank(wire.k) as unknown as Record<string, unknown>;
  for (const [field, value] of Object.entries(wire.row)) {
    object[field] =
      DATES[wire.k].includes(field) && value != null ? new Date(value as number) : value;
  }
  for (const field of wire.lazy ?? []) {
    let value: Promise<unknown> | null = null;
    Object.defineProperty(object, field, {
      enumerable: true,
      configurable: true,
      get: () => (value ??= read(wire.k, wire.row.id as string | number, field)),
    });
  }
  return object as unknown as Plan | AuditEvent | Deployment;
}

/** The object an id-only payload announced, from its row as read now. */
export function fromRow(kind: EventKind, row: Plan | AuditEvent | Deployment): typeof row {
  if (kind !== 'plan') return row;
  // The event announced the publication; the plan may have been superseded since.
  return Object.assign(new Plan(), row, { status: PlanStatus.PUBLISHED, snapshot: undefined });
}

function blank(kind: EventKind): Plan | AuditEvent | Deployment {
  switch (kind) {
    case 'plan':
      return new Plan();
    case 'audit':
      return new AuditEvent();
    case 'deployment':
      return new Deployment();
  }
}

/** Column names of the fields that may be read by id. */
export const COLUMNS: Record<EventKind, { table: string; columns: Record<string, string> }> = {
  plan: { table: 'plans', columns: { ...PLAN_LARGE_FIELDS, title: 'title' } },
  audit: { table: 'audit_events', columns: { detail: 'detail' } },
  deployment: {
    table: 'deployments',
    columns: { detail: 'detail', reconcileNote: 'reconcile_note' },
  },
};
