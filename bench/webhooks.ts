/**
 * Scenario 10: what events that leave the process cost a decision. The same fenced publish
 * as scenario 2 with 0 and with 3 webhooks configured (each wanting every event type, so a
 * publish queues 2 events × 3 deliveries in its transaction), once with the receiver up
 * (the service also sends: the delivery rate is measured beside the publishes) and once
 * with it down (every line's first attempt fails and backs off for the rest of the run:
 * only the outbox's writes are left in the decision's cost).
 */
import { EVENT_TYPES } from '../src/outbox/outbox-event.js';
import { ADMIN_TOKEN, ServiceProcess } from '../test/fault/service.js';
import { Receiver } from '../test/support/receiver.js';
import { fencedPublish, runHttp, type Template, UNLIMITED } from './http.js';
import type { Load, Run } from './measure.js';

/** Adds `count` webhooks for every event type, all to `url`, to a prepared SQLite template. */
export async function addWebhooks(template: Template, count: number, url: string): Promise<void> {
  if (!count) return;
  const service = new ServiceProcess(template.file, { ...UNLIMITED });
  await service.start();
  try {
    for (let i = 0; i < count; i++)
      await service.ok(
        ADMIN_TOKEN,
        'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { webhook { id } } }',
        { input: { url, events: EVENT_TYPES } },
      );
  } finally {
    await service.stop();
  }
}

/**
 * One run of publishes with the template's webhooks. `receiverUp`: the receiver answers and
 * the run reports the deliveries it got per second beside the publishes, and which share of
 * the deliveries those publishes queued had arrived by the end of the load. Down: its port
 * refuses, and the back-off outlasts the run.
 */
export async function runWithWebhooks(
  options: Load & { template: Template; webhooks: number; receiver: Receiver | null },
): Promise<Run> {
  const before = options.receiver?.count ?? 0;
  const run = await runHttp({
    ...options,
    requests: fencedPublish(0),
    env: options.receiver
      ? { PLANFENCE_WEBHOOK_POLL_MS: '100' }
      : {
          PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '3600000',
          PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '3600000',
        },
  });
  if (!options.receiver || !options.webhooks) return run;
  const received = options.receiver.count - before;
  const queued = (run.outcomes.ok ?? 0) * 2 * options.webhooks;
  return {
    ...run,
    background: {
      unit: 'webhook deliveries',
      reqPerSec: received / options.seconds,
      ok: queued ? Math.min(1, received / queued) : 0,
    },
  };
}

/** A loopback URL nothing listens on: connection refused. */
export async function refusingUrl(): Promise<string> {
  const probe = new Receiver();
  await probe.start();
  const url = probe.url;
  await probe.stop();
  return url;
}
