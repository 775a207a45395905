/** `planfence webhook ...`: webhook administration (docs/webhooks.md), ADMIN. */
import type { WebhookDelivery } from '../../client/webhooks.js';
import { type Command, integer, table, UsageError } from '../command.js';

const WEBHOOK = 'id url events environments format batchSize createdAt';
const DELIVERY =
  'id webhookId event environment status attempts createdAt lastAttemptAt nextAttemptAt lastError deliveredAt';

interface Webhook {
  id: string;
  url: string;
  events: string[];
  environments: string[] | null;
  format: string;
  batchSize: number;
  createdAt: string;
}

const split = (values: string[] | undefined) =>
  (values ?? [])
    .flatMap((value) => value.split(','))
    .map((value) => value.trim())
    .filter(Boolean);

const webhookRow = (w: Webhook) => ({
  id: w.id,
  url: w.url,
  format: w.format,
  batch: w.batchSize,
  events: w.events.join(','),
  environments: w.environments?.join(',') ?? '*',
  createdAt: w.createdAt,
});

/** planfence webhook create URL --event E ... [--environments P,...] [--format JSON|SLACK] [--batch-size N] */
export const createWebhook: Command = async ({ client, rest, values, print, need }) => {
  const usage =
    'webhook create URL --event EVENT ... [--environments PATTERN,...] [--format JSON|SLACK] [--batch-size N]';
  need(1, usage);
  const events = split(values.event);
  if (!events.length)
    throw new UsageError(`webhook create needs --event; usage: planfence ${usage}`);
  const format = values.format?.toUpperCase();
  if (format !== undefined && format !== 'JSON' && format !== 'SLACK')
    throw new UsageError(`--format must be JSON or SLACK (got ${values.format})`);
  const environments = split(values.environments);
  const { createWebhook: created } = await client.request<{
    createWebhook: { webhook: Webhook; secret: string };
  }>(
    `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { ${WEBHOOK} } } }`,
    {
      input: {
        url: rest[0],
        events,
        environments: environments.length ? environments : undefined,
        format,
        batchSize:
          values['batch-size'] === undefined
            ? undefined
            : integer(values['batch-size'], '--batch-size'),
      },
    },
  );
  print(
    created,
    () =>
      `webhook ${created.webhook.id} to ${created.webhook.url} for ${created.webhook.events.join(', ')}; signing secret (shown once):\n${created.secret}`,
  );
  return 0;
};

/** planfence webhook list */
export const listWebhooks: Command = async ({ client, print }) => {
  const { webhooks } = await client.request<{ webhooks: Webhook[] }>(`{ webhooks { ${WEBHOOK} } }`);
  print(webhooks, () => table(webhooks.map(webhookRow)));
  return 0;
};

/** planfence webhook delete ID */
export const deleteWebhook: Command = async ({ client, rest, print, need }) => {
  need(1, 'webhook delete WEBHOOK_ID');
  const { deleteWebhook: deleted } = await client.request<{ deleteWebhook: boolean }>(
    'mutation($id: ID!) { deleteWebhook(id: $id) }',
    { id: rest[0] },
  );
  print({ deleted }, () => `deleted webhook ${rest[0]}`);
  return 0;
};

/** planfence webhook deliveries ID [--status S] [--first N] */
export const webhookDeliveries: Command = async ({ client, rest, values, print, need }) => {
  need(1, 'webhook deliveries WEBHOOK_ID [--status PENDING|DELIVERED|FAILED] [--first N]');
  const { webhookDeliveries: deliveries } = await client.request<{
    webhookDeliveries: WebhookDelivery[];
  }>(
    `query($id: ID!, $status: DeliveryStatus, $first: Int!) {
       webhookDeliveries(webhookId: $id, status: $status, first: $first) { ${DELIVERY} } }`,
    {
      id: rest[0],
      status: values.status?.toUpperCase(),
      first: values.first ? integer(values.first, '--first') : 50,
    },
  );
  print(deliveries, () =>
    table(
      deliveries.map((d) => ({
        id: d.id,
        event: d.event,
        environment: d.environment,
        status: d.status,
        attempts: d.attempts,
        lastError: d.lastError,
        nextAttemptAt: d.nextAttemptAt,
        deliveredAt: d.deliveredAt,
      })),
    ),
  );
  return 0;
};

/** planfence webhook redeliver DELIVERY_ID */
export const redeliverWebhook: Command = async ({ client, rest, print, need }) => {
  need(1, 'webhook redeliver DELIVERY_ID');
  const { redeliverWebhook: delivery } = await client.request<{
    redeliverWebhook: WebhookDelivery;
  }>(`mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { ${DELIVERY} } }`, { id: rest[0] });
  print(
    delivery,
    () => `delivery ${delivery.id} is ${delivery.status} again (event ${delivery.event})`,
  );
  return 0;
};
