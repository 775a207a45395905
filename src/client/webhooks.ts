import { createHmac, timingSafeEqual } from 'node:crypto';

/** The JSON body of a planfence webhook request (docs/design.md R23); null where a field does not apply. */
export interface WebhookEvent {
  /** The outbox event id: increases in commit order within an environment. */
  id: string;
  type:
    | 'plan.submitted'
    | 'plan.published'
    | 'plan.rejected'
    | 'plan.expired'
    | 'deployment.started'
    | 'deployment.finished'
    | 'deployment.unknown'
    | 'deployment.reconciled'
    | 'environment.frozen'
    | 'environment.unfrozen'
    | 'lease.granted'
    | 'lease.superseded'
    | 'check.reported'
    | 'environment.drifted';
  /** ISO 8601, by the service clock of the deciding transaction. */
  at: string;
  environment: string;
  /** The fencing token of the plan concerned: compare (generation, sequence) to fence. */
  generation: number | null;
  sequence: number | null;
  planId: string | null;
  deploymentSequence: number | null;
  actor: string | null;
  /** The plan, deployment or environment as it was when the event committed. */
  data: Record<string, unknown>;
}

/**
 * The JSON body a webhook whose batch size is more than 1 receives: consecutive deliveries
 * of one environment, in commit order, each the event with its delivery id (the
 * `Planfence-Delivery` header lists the same ids, for de-duplication). Read it with
 * `verifyWebhook<WebhookBatch>(...)`.
 */
export interface WebhookBatch {
  deliveries: (WebhookEvent & { delivery: string })[];
}

/**
 * One delivery of an event to a webhook, as `webhookDeliveries` and `redeliverWebhook`
 * answer it (the contract's WebhookDelivery; times are ISO 8601).
 */
export interface WebhookDelivery {
  id: string;
  webhookId: string;
  /** The event type delivered (a WebhookEvent's `type`). */
  event: string;
  environment: string;
  status: 'PENDING' | 'DELIVERED' | 'FAILED';
  attempts: number;
  createdAt: string;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  lastError: string | null;
  deliveredAt: string | null;
}

/** Why a request is not a genuine, fresh planfence webhook request. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') {
    return (headers as Headers).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(
    headers as Record<string, string | string[] | undefined>,
  )) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/**
 * Verifies a webhook request and returns its parsed body; throws a WebhookVerificationError
 * otherwise. `body` must be the raw body as received (the exact bytes that were signed, not
 * a re-serialized object). The `Planfence-Signature` header is `t=<unix seconds>,v1=<hex>`,
 * where the hex is HMAC-SHA256(secret, "<t>.<body>"); the comparison is constant-time, and a
 * `t` more than `toleranceSeconds` away from this machine's clock is refused (a replayed
 * old request). Several `v1=` values are accepted (any one matching).
 *
 * For a SLACK-format webhook the parsed body is `{ text }` rather than a WebhookEvent.
 */
export function verifyWebhook<T = WebhookEvent>(
  secret: string,
  headers: WebhookHeaders,
  body: string | Uint8Array,
  toleranceSeconds = 300,
): T {
  const raw = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const value = header(headers, 'planfence-signature');
  if (!value) throw new WebhookVerificationError('no Planfence-Signature header');
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of value.split(',')) {
    const [key, ...rest] = part.trim().split('=');
    const text = rest.join('=');
    if (key === 't' && /^\d{1,12}$/.test(text)) timestamp = Number(text);
    if (key === 'v1' && /^[0-9a-f]{64}$/i.test(text)) signatures.push(text.toLowerCase());
  }
  if (timestamp === null || !signatures.length) {
    throw new WebhookVerificationError('Planfence-Signature must be t=<unix seconds>,v1=<hex>');
  }
  const expected = createHmac('sha256', secret).update(`${timestamp}.${raw}`).digest();
  const matches = signatures.some((signature) =>
    timingSafeEqual(Buffer.from(signature, 'hex'), expected),
  );
  if (!matches) throw new WebhookVerificationError('the signature does not match');
  const skew = Math.abs(Date.now() / 1000 - timestamp);
  if (skew > toleranceSeconds) {
    throw new WebhookVerificationError(
      `the signature's time is ${Math.round(skew)} s away from now (tolerance ${toleranceSeconds} s)`,
    );
  }
  try {
    return JSON.parse(raw) as T;
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
}
