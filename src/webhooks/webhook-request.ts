import { createHmac } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
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
 * to a receiver are kept alive between requests, so the requests of a line sent one after
 * another reuse one connection.
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
  return post(first.url, headers, body, timeoutMs);
}

/**
 * One connection pool per scheme for every webhook, connections kept alive between
 * requests (node:http's Agent: a line's requests sent one after another reuse one).
 */
const agents = {
  'http:': new HttpAgent({ keepAlive: true }),
  'https:': new HttpsAgent({ keepAlive: true }),
};

/**
 * POSTs `body` with node:http(s): no redirect is followed; `timeoutMs` bounds the whole
 * exchange (connect, request, answer). Null for a 2xx answer, else why not. (node:http
 * rather than fetch: a request costs the service a fraction of fetch's CPU, which matters
 * when deliveries run beside the decisions on one thread.)
 */
function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<string | null> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve('invalid url');
  }
  const agent = target.protocol === 'https:' ? agents['https:'] : agents['http:'];
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    /** The answer's outcome once its status arrived (a body that then stalls changes nothing). */
    let answered: string | null | undefined;
    let done = false;
    const finish = (outcome: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const request = send(
      target,
      {
        method: 'POST',
        agent,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        const outcome = status >= 200 && status < 300 ? null : `HTTP ${status}`;
        answered = outcome;
        // At most MAX_RESPONSE_BYTES of the answer are read; the status is what counts.
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read < MAX_RESPONSE_BYTES) return;
          response.destroy();
          finish(outcome);
        });
        response.on('end', () => finish(outcome));
        response.on('error', () => finish(outcome));
        response.on('close', () => finish(outcome));
      },
    );
    const timer = setTimeout(() => {
      request.destroy();
      finish(answered !== undefined ? answered : `timed out after ${timeoutMs} ms`);
    }, timeoutMs);
    request.on('error', (error) => finish(reasonOf(error)));
    request.end(body);
  });
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
function reasonOf(error: unknown): string {
  const e = error as { code?: string; message?: string };
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host lookup failed',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    EPIPE: 'connection closed',
  };
  const text = (e?.code && known[e.code]) ?? e?.code ?? e?.message ?? String(error);
  return text.slice(0, 200);
}
