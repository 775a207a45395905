/** The event types a webhook can ask for (docs/design.md R22). */
export const EVENT_TYPES = [
  'plan.submitted',
  'plan.published',
  'plan.rejected',
  'plan.expired',
  'deployment.started',
  'deployment.finished',
  'deployment.unknown',
  'deployment.reconciled',
  'environment.frozen',
  'environment.unfrozen',
  'lease.granted',
  'lease.superseded',
  'check.reported',
  'environment.drifted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/**
 * One event as the outbox keeps it and as a webhook's JSON body carries it (R23): the
 * fencing token of the plan it concerns (generation, sequence) where one applies, so that a
 * receiver that can compare tokens fences by them; `data` is the event's object as it was
 * when the event's transaction committed.
 */
export interface OutboxEvent {
  environment: string;
  type: EventType;
  /** Milliseconds since the epoch, by the service clock of the deciding transaction. */
  at: number;
  generation: number | null;
  sequence: number | null;
  planId: string | null;
  deploymentSequence: number | null;
  actor: string | null;
  data: unknown;
}

/** An outbox row read back: the event and its id (the order of its environment's events). */
export interface StoredEvent extends OutboxEvent {
  id: string;
}

/** The body a JSON webhook receives: the event, its time as an ISO 8601 string. */
export type EventBody = Omit<StoredEvent, 'at'> & { at: string };

/** In the documented order of its fields (R23). */
export function eventBody(event: StoredEvent): EventBody {
  return {
    id: event.id,
    type: event.type,
    at: new Date(event.at).toISOString(),
    environment: event.environment,
    generation: event.generation,
    sequence: event.sequence,
    planId: event.planId,
    deploymentSequence: event.deploymentSequence,
    actor: event.actor,
    data: event.data,
  };
}
