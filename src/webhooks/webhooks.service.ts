import { randomBytes, randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { Principal } from '../model/principal.entity.js';
import { ENVIRONMENT_PATTERN, MAX_ENVIRONMENT_PATTERNS } from '../common/environment-pattern.js';
import { Clock } from '../common/clock.js';
import { Database, execute, select } from '../database/database.js';
import { EVENT_TYPES } from '../outbox/outbox-event.js';
import { likePattern } from '../outbox/outbox.service.js';
import type { CreateWebhookInput, WebhookDeliveriesArgs } from './dto/create-webhook.input.js';
import { WebhookDispatcher } from './dispatcher.js';
import {
  type CreatedWebhook,
  type DeliveryStatus,
  type Webhook,
  type WebhookDelivery,
  type WebhookFormat,
  MAX_BATCH_SIZE,
} from './webhook.model.js';
import { WebhookError } from './webhooks.errors.js';

/** docs/design.md §6: webhook URLs are http(s), up to 2,048 characters. */
export const MAX_URL_LENGTH = 2048;

interface WebhookRow {
  id: string;
  url: string;
  format: string;
  events: string;
  environments: string | null;
  batch_size: number | string;
  created_at: number | string;
}

interface DeliveryRow {
  id: number | string;
  webhook_id: string;
  event_type: string;
  environment: string;
  status: string;
  attempts: number | string;
  created_at: number | string;
  last_attempt_at: number | string | null;
  next_attempt_at: number | string | null;
  last_error: string | null;
  delivered_at: number | string | null;
}

const WEBHOOK_COLUMNS = 'id, url, format, events, environments, batch_size, created_at';

const DELIVERY_COLUMNS = `id, webhook_id, event_type, environment, status, attempts, created_at,
  last_attempt_at, next_attempt_at, last_error, delivered_at`;

const time = (value: number | string | null): Date | null =>
  value == null ? null : new Date(Number(value));

function webhookOf(row: WebhookRow): Webhook {
  return {
    id: row.id,
    url: row.url,
    format: row.format as WebhookFormat,
    events: JSON.parse(row.events) as string[],
    environments: row.environments == null ? null : (JSON.parse(row.environments) as string[]),
    batchSize: Number(row.batch_size),
    createdAt: new Date(Number(row.created_at)),
  };
}

function deliveryOf(row: DeliveryRow): WebhookDelivery {
  return {
    id: String(row.id),
    webhookId: row.webhook_id,
    event: row.event_type,
    environment: row.environment,
    status: row.status as DeliveryStatus,
    attempts: Number(row.attempts),
    createdAt: new Date(Number(row.created_at)),
    lastAttemptAt: time(row.last_attempt_at),
    // A delivery that is no longer PENDING has no next attempt.
    nextAttemptAt: row.status === 'PENDING' ? time(row.next_attempt_at) : null,
    lastError: row.last_error,
    deliveredAt: time(row.delivered_at),
  };
}

/** Checks a webhook's URL: http or https, parsable, without credentials, at most 2,048 characters. */
export function checkUrl(url: string): void {
  if (url.length > MAX_URL_LENGTH) {
    throw WebhookError.badInput(`url must be at most ${MAX_URL_LENGTH} characters long`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw WebhookError.badInput('url must be an absolute http or https URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw WebhookError.badInput(`url must be http or https (got ${parsed.protocol.slice(0, 20)})`);
  }
  if (parsed.username || parsed.password) {
    throw WebhookError.badInput('url must not contain credentials (user:password@)');
  }
  if (!parsed.hostname) throw WebhookError.badInput('url must name a host');
}

/** A non-empty list of known event types, each once. */
export function checkEvents(events: string[]): void {
  if (!events.length) throw WebhookError.badInput(`events must name at least one event type`);
  const seen = new Set<string>();
  for (const event of events) {
    if (!(EVENT_TYPES as readonly string[]).includes(event)) {
      throw WebhookError.badInput(
        `unknown event type "${event.slice(0, 64)}"; known: ${EVENT_TYPES.join(', ')}`,
      );
    }
    if (seen.has(event)) throw WebhookError.badInput(`event type "${event}" is given twice`);
    seen.add(event);
  }
}

/** null (all environments) or 1..MAX_ENVIRONMENT_PATTERNS distinct name patterns. */
export function checkEnvironments(patterns: string[] | null | undefined): void {
  if (patterns == null) return;
  if (patterns.length < 1 || patterns.length > MAX_ENVIRONMENT_PATTERNS) {
    throw WebhookError.badInput(
      `environments must hold 1 to ${MAX_ENVIRONMENT_PATTERNS} patterns (null: every environment)`,
    );
  }
  const seen = new Set<string>();
  for (const pattern of patterns) {
    if (!ENVIRONMENT_PATTERN.test(pattern)) {
      throw WebhookError.badInput(
        `environment pattern "${pattern.slice(0, 64)}" must match ${ENVIRONMENT_PATTERN.source}`,
      );
    }
    if (seen.has(pattern))
      throw WebhookError.badInput(`environment pattern "${pattern}" is given twice`);
    seen.add(pattern);
  }
}

/** 1..MAX_BATCH_SIZE events per request. */
export function checkBatchSize(batchSize: number): void {
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    throw WebhookError.badInput(
      `batchSize must be an integer from 1 to ${MAX_BATCH_SIZE} (got ${batchSize})`,
    );
  }
}

/** A signing secret: `whsec_` and 32 random bytes, base64url. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * Webhook administration (R22, ADMIN only): create, list, delete; deliveries and their
 * redelivery. The dispatcher (dispatcher.ts) sends what the outbox queued.
 */
@Injectable()
export class WebhooksService {
  /** The audit log is per environment and webhooks are not: their administration is logged here. */
  private readonly logger = new Logger('Webhooks');

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly dispatcher: WebhookDispatcher,
  ) {}

  async create(principal: Principal, input: CreateWebhookInput): Promise<CreatedWebhook> {
    checkUrl(input.url);
    checkEvents(input.events);
    checkEnvironments(input.environments);
    checkBatchSize(input.batchSize);
    const id = randomUUID();
    const secret = newSecret();
    const environments = input.environments ?? null;
    const row = await this.db.write(async (m) => {
      const now = await this.clock.now(m);
      // While no webhook exists the dispatcher leaves events as they are; none of them is for
      // this one (it hears what commits from now on): the first webhook finds them all done.
      await execute(
        m,
        `UPDATE outbox_events SET fanned_out = 1
         WHERE fanned_out = 0 AND at < :now AND NOT EXISTS (SELECT 1 FROM webhooks)`,
        { now },
      );
      await execute(
        m,
        `INSERT INTO webhooks (id, url, format, secret, events, environments, all_environments,
           batch_size, created_by, created_at)
         VALUES (:id, :url, :format, :secret, :events, :environments, :all, :batchSize,
           :createdBy, :now)`,
        {
          id,
          url: input.url,
          format: input.format,
          secret,
          events: JSON.stringify(input.events),
          environments: environments && JSON.stringify(environments),
          all: environments ? 0 : 1,
          batchSize: input.batchSize,
          createdBy: principal.name,
          now,
        },
      );
      for (const eventType of input.events) {
        await execute(
          m,
          'INSERT INTO webhook_event_types (webhook_id, event_type) VALUES (:id, :eventType)',
          { id, eventType },
        );
      }
      for (const pattern of environments ?? []) {
        await execute(
          m,
          'INSERT INTO webhook_environments (webhook_id, pattern) VALUES (:id, :pattern)',
          { id, pattern: likePattern(pattern) },
        );
      }
      return this.findRow(m, id);
    });
    this.dispatcher.webhookCreated();
    this.logger.log(
      `webhook ${id} created by ${principal.name}: ${new URL(input.url).host}, ${input.events.join(' ')}, environments ${environments?.join(' ') ?? 'all'}, ${input.batchSize} event(s) per request`,
    );
    return { webhook: webhookOf(row!), secret };
  }

  async list(): Promise<Webhook[]> {
    const rows = await this.db.read((m) =>
      select<WebhookRow>(m, `SELECT ${WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, id`),
    );
    return rows.map(webhookOf);
  }

  /** Removes the webhook and every delivery of it (a request in flight is still answered). NOT_FOUND if unknown. */
  async delete(principal: Principal, id: string): Promise<boolean> {
    await this.db.write(async (m) => {
      await execute(m, 'DELETE FROM webhook_deliveries WHERE webhook_id = :id', { id });
      await execute(m, 'DELETE FROM webhook_event_types WHERE webhook_id = :id', { id });
      await execute(m, 'DELETE FROM webhook_environments WHERE webhook_id = :id', { id });
      if (!(await execute(m, 'DELETE FROM webhooks WHERE id = :id', { id }))) {
        throw WebhookError.notFound('webhook', id);
      }
    });
    this.logger.log(`webhook ${id} deleted by ${principal.name}`);
    return true;
  }

  /** Newest first. NOT_FOUND for an unknown webhook. */
  async deliveries({
    webhookId,
    status,
    first,
  }: WebhookDeliveriesArgs): Promise<WebhookDelivery[]> {
    const rows = await this.db.read(async (m) => {
      if (!(await this.findRow(m, webhookId))) throw WebhookError.notFound('webhook', webhookId);
      return status
        ? select<DeliveryRow>(
            m,
            `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
             WHERE webhook_id = :webhookId AND status = :status ORDER BY id DESC LIMIT :first`,
            { webhookId, status, first },
          )
        : select<DeliveryRow>(
            m,
            `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
             WHERE webhook_id = :webhookId ORDER BY id DESC LIMIT :first`,
            { webhookId, first },
          );
    });
    return rows.map(deliveryOf);
  }

  /**
   * A FAILED or DELIVERED delivery becomes PENDING again, due now, its attempts and maximum
   * age counted afresh. It keeps its id (the receiver's `Planfence-Delivery` stays the same)
   * and so its place in its (webhook, environment) line: deliveries after it wait for it
   * again. A PENDING delivery is returned as it is (it is on its way). NOT_FOUND if unknown.
   */
  async redeliver(principal: Principal, deliveryId: string): Promise<WebhookDelivery> {
    const row = await this.db.write(async (m) => {
      const now = await this.clock.now(m);
      await execute(
        m,
        `UPDATE webhook_deliveries
         SET status = 'PENDING', attempts = 0, retry_from = :now, next_attempt_at = :now,
             delivered_at = NULL, claimed_by = NULL, claimed_until = NULL
         WHERE id = :id AND status IN ('FAILED', 'DELIVERED')`,
        { id: Number(deliveryId), now },
      );
      const [found] = await select<DeliveryRow>(
        m,
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = :id`,
        { id: Number(deliveryId) },
      );
      if (!found) throw WebhookError.notFound('delivery', deliveryId);
      return found;
    });
    this.dispatcher.lineChanged(row.webhook_id, row.environment);
    this.dispatcher.wake();
    this.logger.log(`webhook delivery ${deliveryId} redelivered by ${principal.name}`);
    return deliveryOf(row);
  }

  private async findRow(m: EntityManager, id: string): Promise<WebhookRow | undefined> {
    const [row] = await select<WebhookRow>(
      m,
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = :id`,
      { id },
    );
    return row;
  }
}
