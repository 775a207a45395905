import { createHmac } from 'node:crypto';
import { eventBody, type StoredEvent } from '../outbox/outbox-event.js';
import { slackText } from './slack.js';
import { WebhookFormat } from './webhook.model.js';

/** At most this much of a receiver's answer is read (and then dropped). */
const MAX_RESPONSE_BYTES = 4096;

/** What one delivery needs: its id, the webhook's address, format, secret and batch size, the event. */
export interface WebhookRequest {
  id: number;
  url: string;
  format: WebhookFormat;
  secret: string;
  /** 1: the body is the event; more: the body lists the request's deliveries. */
  batchSize: number;
  event: StoredEvent;
}

/** `Planfence-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` (R23). */
export function signature(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * The request body of consecutive deliveries of one webhook's line in its format. A webhook
 * of batch size 1 gets the event itself (R23); a larger one `{ "deliveries": [...] }`, each
 * the event with its delivery id first, in commit order (a Slack message gets one line per
 * event).
 */
export function requestBody(deliveries: readonly WebhookRequest[]): string {
  const [first] = deliveries;
  if (first.format === WebhookFormat.SLACK)
    return JSON.stringify({ text: deliveries.map((d) => slackText(d.event)).join('\n') });
  if (first.batchSize === 1) return JSON.stringify(eventBody(first.event));
  return JSON.stringify({
    deliveries: deliveries.map((d) => ({ delivery: String(d.id), ...eventBody(d.event) })),
  });
}

/**
 * Sends consecutive deliveries of one (webhook, environment) line in one request (one
 * delivery unless the webhook takes batches): `POST` with the signed body, redirects not
 * followed, at most `timeoutMs` for the whole exchange; `Planfence-Delivery` and
 * `Planfence-Event` list the deliveries' ids and event types in order. Null when the
 * receiver answered 2xx (every delivery of the request arrived), else why not. Connections
 * to a receiver are kept alive between requests (fetch's connection pool), so the requests
 * of a line sent one after another reuse one connection.
 */
export async function sendWebhook(
  deliveries: readonly WebhookRequest[],
  timeoutMs: number,
): Promise<string | null> {
  const [first] = deliveries;
  const body = requestBody(deliveries);
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'planfence',
    'planfence-event': deliveries.map((d) => d.event.type).join(', '),
    'planfence-delivery': deliveries.map((d) => d.id).join(', '),
    'planfence-signature': signature(first.secret, body, Math.floor(Date.now() / 1000)),
  };
  try {
    const response = await fetch(first.url, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await drain(response);
    if (response.status >= 200 && response.status < 300) return null;
    return `HTTP ${response.status}`;
  } catch (error) {
    return reasonOf(error, timeoutMs);
  }
}

/** The host of a webhook's URL, for logs (never its path or query, which may hold a token). */
export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}

/** A short, truthful reason for a failed request (no stack, no body). */
function reasonOf(error: unknown, timeoutMs: number): string {
  const e = error as {
    name?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError')
    return `timed out after ${timeoutMs} ms`;
  const code = e?.cause?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host lookup failed',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    UND_ERR_SOCKET: 'connection closed',
    UND_ERR_HEADERS_TIMEOUT: `timed out after ${timeoutMs} ms`,
  };
  const text = (code && known[code]) ?? code ?? e?.cause?.message ?? e?.message ?? String(error);
  return text.slice(0, 200);
}

/** Reads at most MAX_RESPONSE_BYTES of the answer and drops the rest. */
async function drain(response: Response): Promise<void> {
  if (!response.body) return;
  let read = 0;
  try {
    // Leaving the loop early cancels the rest of the stream.
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      read += chunk.byteLength;
      if (read >= MAX_RESPONSE_BYTES) break;
    }
  } catch {
    // The status is what counts; a body cut short changes nothing.
  }
}
