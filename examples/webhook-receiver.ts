// A webhook receiver that acts on planfence events safely. (In your project: import from
// 'planfence/client'.)
//
// Delivery is at least once: after a timeout or a crash the same delivery can arrive again,
// always with the same Planfence-Delivery id. And an event can arrive late: a receiver that
// was down hears an old publication after it already acted on a newer one from another
// source. So this receiver
//   1. verifies the signature over the raw body (verifyWebhook),
//   2. de-duplicates by Planfence-Delivery,
//   3. fences by the plan's token: it remembers, per environment, the highest
//      (generation, sequence) it acted on for plan.published and ignores anything not higher.
// It takes both bodies: one event (a webhook of batch size 1) and a batch (`{ deliveries }`,
// a webhook of a larger batch size), whose events it handles one by one, in order.
// Run: PLANFENCE_WEBHOOK_SECRET=whsec_... PORT=8787 node dist/examples/webhook-receiver.js
import { createServer, type IncomingMessage, type Server } from 'node:http';
import {
  verifyWebhook,
  type WebhookBatch,
  type WebhookEvent,
  WebhookVerificationError,
} from '../src/client/index.js';

/** The largest body this receiver reads (planfence's bodies carry no plan content). */
const MAX_BODY_BYTES = 256 * 1024;

/** A fencing token; compared generation first, then sequence. */
type Token = { generation: number; sequence: number };

const above = (a: Token, b: Token | undefined) =>
  !b || a.generation > b.generation || (a.generation === b.generation && a.sequence > b.sequence);

export interface ReceiverState {
  /** Delivery ids already handled (keep these in your database, with the fences, in one transaction). */
  seen: Set<string>;
  /** Per environment, the token of the newest publication acted on. */
  published: Map<string, Token>;
}

export type Verdict = 'acted' | 'duplicate' | 'stale' | 'ignored';

/**
 * Decides what to do with one verified event; `act` is your side effect (trigger a deploy,
 * post to an incident tool). Returns what happened, for the answer and the log.
 */
export async function handle(
  state: ReceiverState,
  deliveryId: string,
  event: WebhookEvent,
  act: (event: WebhookEvent) => Promise<void>,
): Promise<Verdict> {
  if (state.seen.has(deliveryId)) return 'duplicate';
  let verdict: Verdict = 'acted';
  if (event.type === 'plan.published' && event.generation != null && event.sequence != null) {
    const token = { generation: event.generation, sequence: event.sequence };
    if (above(token, state.published.get(event.environment))) {
      await act(event);
      state.published.set(event.environment, token);
    } else verdict = 'stale';
  } else if (event.type === 'plan.published') {
    verdict = 'ignored';
  } else {
    await act(event);
  }
  state.seen.add(deliveryId);
  return verdict;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('body too large'));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The (delivery id, event) pairs of a verified body: one event, or a batch's, in order. */
function deliveriesOf(body: WebhookEvent | WebhookBatch, header: string): [string, WebhookEvent][] {
  return 'deliveries' in body
    ? body.deliveries.map((event) => [event.delivery, event])
    : [[header, body]];
}

/**
 * An HTTP server for planfence webhooks. It answers 2xx once every event of the request is
 * handled (or was already), 401 for a bad signature (planfence retries, so a wrong secret
 * shows up as FAILED deliveries), 500 when `act` throws (planfence retries later, in order;
 * the events of a batch handled before it are then duplicates).
 */
export function createReceiver(
  secret: string,
  act: (event: WebhookEvent) => Promise<void>,
  state: ReceiverState = { seen: new Set(), published: new Map() },
): Server {
  // One event at a time: the check of `seen`/`published` and the update must not interleave.
  let queue: Promise<unknown> = Promise.resolve();
  return createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    readBody(req)
      .then(async (body) => {
        let verified: WebhookEvent | WebhookBatch;
        try {
          verified = verifyWebhook<WebhookEvent | WebhookBatch>(secret, req.headers, body);
        } catch (error) {
          if (!(error instanceof WebhookVerificationError)) throw error;
          res.writeHead(401, { 'content-type': 'text/plain' }).end(error.message);
          return;
        }
        const events = deliveriesOf(verified, String(req.headers['planfence-delivery'] ?? ''));
        const run = queue.then(async () => {
          const verdicts: Verdict[] = [];
          for (const [deliveryId, event] of events)
            verdicts.push(await handle(state, deliveryId, event, act));
          return verdicts;
        });
        queue = run.catch(() => undefined);
        const verdicts = await run;
        res.writeHead(200, { 'content-type': 'text/plain' }).end(verdicts.join(' '));
      })
      .catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(error instanceof Error ? error.message : 'error');
      });
  });
}

function main(): void {
  const secret = process.env.PLANFENCE_WEBHOOK_SECRET;
  if (!secret) throw new Error('set PLANFENCE_WEBHOOK_SECRET to the secret createWebhook showed');
  const port = Number(process.env.PORT ?? 8787);
  createReceiver(secret, (event) => {
    // Your side effect goes here.
    console.log(
      `${event.environment} ${event.type} ${event.planId ?? ''} by ${event.actor ?? '?'}`,
    );
    return Promise.resolve();
  }).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/`));
}

if (import.meta.url === `file://${process.argv[1]}`) main();
