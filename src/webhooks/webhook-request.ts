import { createHmac } from 'node:crypto';
import { eventBody, type StoredEvent } from '../outbox/outbox-event.js';
import { slackText } from './slack.js';
import { WebhookFormat } from './webhook.model.js';

/** At most this much of a receiver's answer is read (and then dropped). */
const MAX_RESPONSE_BYTES = 4096;

/** What one request needs: the delivery id, the webhook's address, format and secret, the event. */
export interface WebhookRequest {
  id: number;
  url: string;
  format: WebhookFormat;
  secret: string;
  event: StoredEvent;
}

/** `Planfence-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` (R23). */
export function signature(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** The request body of a delivery in its webhook's format. */
export function requestBody(format: WebhookFormat, event: StoredEvent): string {
  return format === WebhookFormat.SLACK
    ? JSON.stringify({ text: slackText(event) })
    : JSON.stringify(eventBody(event));
}

/**
 * Sends one delivery: `POST` with the signed body, redirects not followed, at most
 * `timeoutMs` for the whole exchange. Null when the receiver answered 2xx, else why not.
 * Connections to a receiver are kept alive between requests (fetch's connection pool), so
 * the deliveries of a line sent one after another reuse one connection.
 */
export async function sendWebhook(
  request: WebhookRequest,
  timeoutMs: number,
): Promise<string | null> {
  const body = requestBody(request.format, request.event);
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'planfence',
    'planfence-event': request.event.type,
    'planfence-delivery': String(request.id),
    'planfence-signature': signature(request.secret, body, Math.floor(Date.now() / 1000)),
  };
  try {
    const response = await fetch(request.url, {
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
