import type { AddressInfo } from 'node:net';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FindOptionsSelect } from 'typeorm';
import { ChecksService } from '../checks/checks.service.js';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { allowsEnvironment } from '../auth/scope.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute, jsonList, select } from '../database/database.js';
import { Outbox } from '../outbox/outbox.service.js';
import { Plan, PLAN_FIELDS_BUT_CONTENT, PlanStatus } from '../model/plan.entity.js';
import { PlansService } from '../plans/plans.service.js';
import { reviewUrl } from '../plans/review-url.js';
import { SlackApi, SlackApiError } from './slack-api.js';
import type { SlackConfig } from '../config/slack-config.js';
import { countsInWords, FINAL_STATUSES, type PlanView, renderMessage } from './slack-message.js';

/** What a redraw reads of a plan: not its content, summary or plan file. */
const SMALL_FIELDS = Object.fromEntries(
  [...PLAN_FIELDS_BUT_CONTENT, 'policyResults'].map((field) => [field, true]),
) as FindOptionsSelect<Plan>;

/** Open messages are redrawn (when what they show changed) at least this often. */
const POLL_MS = 1000;
/** Outbox events taken per round. */
const EVENTS_PER_ROUND = 200;
/**
 * A message is one instance's for this long while it is posted or updated: longer than a
 * Web API call may take (SlackApi gives up after 10 s).
 */
const CLAIM_MS = 15_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 300_000;

interface MessageRow {
  plan_id: string;
  channel: string;
  ts: string | null;
  drawn_hash: string | null;
  attempts: number | string;
}

/**
 * One Slack message per plan awaiting review (DESIGN §20), kept current in place.
 *
 * Through the outbox (R22): `plan.submitted` events are written by the deciding transaction;
 * each outbox event is taken once here (`slack_pending`), and a plan.submitted of an
 * environment that a channel reviews becomes a `slack_messages` row in the transaction that
 * takes it. A row is then worked until its message is posted and final: posted once
 * (chat.postMessage, its ts stored), redrawn (chat.update) whenever what it shows changed
 * (an approval, publication, supersession, obsolescence, rejection, expiry), its buttons
 * gone once the plan is decided. Failures are retried with exponential backoff and jitter;
 * Slack's 429 Retry-After is honoured. A kill -9 loses nothing: a row not yet posted is
 * posted after the restart (a kill between Slack's answer and the stored ts may post twice:
 * Slack's API has no idempotency key).
 */
@Injectable()
export class SlackMessages implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('SlackMessages');
  private readonly slack: SlackConfig | null;
  private readonly api: SlackApi | null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  /** countsInWords of each plan's summary (immutable), so that a redraw never reads the summary again. */
  private readonly changes = new Map<string, string | null>();

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly outbox: Outbox,
    private readonly plans: PlansService,
    private readonly checks: ChecksService,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.slack = config.slack;
    this.api = config.slack ? new SlackApi(config.slack) : null;
  }

  get enabled(): boolean {
    return this.api !== null;
  }

  apiClient(): SlackApi {
    if (!this.api) throw new Error('Slack is not configured');
    return this.api;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.api) return;
    // SQLite: this process alone owns the database, so a claim left is a dead process's.
    if (this.db.dialect === 'sqlite')
      await this.db.write((m) => execute(m, 'UPDATE slack_messages SET claimed_until = NULL'));
    this.unsubscribe = this.outbox.onRecorded(() => this.wake());
    this.timer = setInterval(() => this.wake(), POLL_MS);
    this.timer.unref();
    this.wake();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** The channel that reviews `environment`: the first entry whose patterns match; null: none. */
  channelOf(environment: string): string | null {
    return (
      this.slack?.channels.find((c) => allowsEnvironment(c.environments, environment))?.channel ??
      null
    );
  }

  /** The console's address as reviewers reach it: PLANFENCE_PUBLIC_URL, else this listener. */
  consoleBase(): string {
    if (this.config.mcp.publicUrl) return this.config.mcp.publicUrl;
    const address = (
      this.adapterHost.httpAdapter?.getHttpServer() as { address(): AddressInfo | string | null }
    )?.address();
    const port = address && typeof address === 'object' ? address.port : this.config.port;
    return `http://localhost:${port}`;
  }

  /** Runs a round now (or right after the one in progress). */
  wake(): void {
    if (this.stopped || !this.api) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((error: unknown) =>
        this.logger.warn(`Slack round failed: ${(error as Error).message}`),
      )
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Redraws `planId`'s message at the next round, whatever its backoff. */
  async redrawSoon(planId: string): Promise<void> {
    await this.db.write((m) =>
      execute(m, 'UPDATE slack_messages SET next_attempt_at = 0 WHERE plan_id = :planId', {
        planId,
      }),
    );
    this.wake();
  }

  private async round(): Promise<void> {
    while (!this.stopped && (await this.takeEvents()) === EVENTS_PER_ROUND);
    const now = await this.clock.now();
    const due = await this.db.read((m) =>
      select<MessageRow>(
        m,
        `SELECT plan_id, channel, ts, drawn_hash, attempts FROM slack_messages
         WHERE closed = 0 AND next_attempt_at <= :now
           AND (claimed_until IS NULL OR claimed_until < :now)
         ORDER BY created_at LIMIT 100`,
        { now },
      ),
    );
    for (const row of due) {
      if (this.stopped) return;
      await this.work(row).catch((error: unknown) =>
        this.logger.warn(`Slack message of ${row.plan_id}: ${(error as Error).message}`),
      );
    }
  }

  /** Takes the next outbox events not yet taken: each plan.submitted of a reviewed environment becomes a message row. */
  private async takeEvents(): Promise<number> {
    return this.db.write(async (m) => {
      const events = await select<{
        id: number | string;
        type: string;
        environment: string;
        plan_id: string | null;
      }>(
        m,
        `SELECT id, type, environment, plan_id FROM outbox_events WHERE slack_pending = 1
         ORDER BY id LIMIT :limit`,
        { limit: EVENTS_PER_ROUND },
      );
      if (!events.length) return 0;
      const now = await this.clock.now(m);
      for (const event of events) {
        if (event.type !== 'plan.submitted' || !event.plan_id) continue;
        const channel = this.channelOf(event.environment);
        if (!channel) continue;
        await execute(
          m,
          `INSERT INTO slack_messages (plan_id, environment, channel, closed, attempts,
             next_attempt_at, created_at)
           VALUES (:planId, :environment, :channel, 0, 0, 0, :now)
           ON CONFLICT (plan_id) DO NOTHING`,
          { planId: event.plan_id, environment: event.environment, channel, now },
        );
      }
      await execute(
        m,
        `UPDATE outbox_events SET slack_pending = 0
         WHERE id IN (${jsonList(this.db.dialect, 'ids', 'integer')})`,
        { ids: JSON.stringify(events.map((e) => Number(e.id))) },
      );
      return events.length;
    });
  }

  /** What the message of `planId` shows now; null when the plan is gone. */
  async view(planId: string): Promise<PlanView | null> {
    // Every open message is looked at each round: its plan is read without its large fields.
    const plan = await this.db.read((m) =>
      m.getRepository(Plan).findOne({
        where: { id: planId },
        select: SMALL_FIELDS,
      }),
    );
    if (!plan) return null;
    const status = await this.plans.status(plan);
    const proposed = status === PlanStatus.PROPOSED;
    const [approvals, pendingRules, pendingChecks, environment] = await Promise.all([
      this.plans.approvals(plan),
      proposed ? this.plans.pendingApprovalRules(plan) : Promise.resolve([]),
      proposed ? this.checks.pending(plan) : Promise.resolve([]),
      this.db.read((m) =>
        select<{ deployment_sequence: number | string }>(
          m,
          'SELECT deployment_sequence FROM environments WHERE name = :name',
          { name: plan.environment },
        ),
      ),
    ]);
    return {
      plan,
      changes: await this.changesOf(planId),
      status,
      approvals,
      pendingRules,
      pendingChecks,
      deploymentSequence: Number(environment[0]?.deployment_sequence ?? 0),
      reviewUrl: reviewUrl(this.consoleBase(), plan.id),
    };
  }

  private async changesOf(planId: string): Promise<string | null> {
    if (this.changes.has(planId)) return this.changes.get(planId) ?? null;
    const [row] = await this.db.read((m) =>
      select<{ summary: string | null }>(m, 'SELECT summary FROM plans WHERE id = :planId', {
        planId,
      }),
    );
    const words = countsInWords(row?.summary ?? null);
    if (this.changes.size >= 10_000) this.changes.delete(this.changes.keys().next().value!);
    this.changes.set(planId, words);
    return words;
  }

  /** Posts or redraws one message if what it shows changed; claimed by this instance meanwhile. */
  private async work(row: MessageRow): Promise<void> {
    const view = await this.view(row.plan_id);
    const final = !view || FINAL_STATUSES.includes(view.status);
    if (!view || (row.ts === null && view.status !== PlanStatus.PROPOSED)) {
      // Decided (or gone) before its message went out: it no longer awaits review.
      await this.settle(row.plan_id, { closed: true });
      return;
    }
    const message = renderMessage(view);
    const hash = sha256(JSON.stringify(message));
    if (row.ts !== null && hash === row.drawn_hash) {
      if (final) await this.settle(row.plan_id, { closed: true });
      return;
    }
    const now = await this.clock.now();
    const claimed = await this.db.write((m) =>
      execute(
        m,
        `UPDATE slack_messages SET claimed_until = :until
         WHERE plan_id = :planId AND closed = 0
           AND ${row.ts === null ? 'ts IS NULL' : 'ts = :ts'}
           AND (claimed_until IS NULL OR claimed_until < :now)`,
        { planId: row.plan_id, ts: row.ts, now, until: now + CLAIM_MS },
      ),
    );
    if (!claimed) return;
    const api = this.apiClient();
    try {
      if (row.ts === null) {
        const posted = await api.call<{ ts: string; channel: string }>('chat.postMessage', {
          channel: row.channel,
          ...message,
        });
        await this.settle(row.plan_id, {
          ts: posted.ts,
          channel: posted.channel ?? row.channel,
          drawnHash: hash,
          closed: final,
        });
      } else {
        await api.call('chat.update', { channel: row.channel, ts: row.ts, ...message });
        await this.settle(row.plan_id, { drawnHash: hash, closed: final });
      }
    } catch (error) {
      const attempts = Number(row.attempts) + 1;
      const retryable = !(error instanceof SlackApiError) || error.retryable;
      const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempts - 1, 20));
      const wait =
        error instanceof SlackApiError && error.retryAfterMs !== null
          ? error.retryAfterMs
          : (retryable ? backoff : BACKOFF_MAX_MS) * (0.5 + Math.random() / 2);
      this.logger.warn(
        `Slack message of ${row.plan_id}: ${(error as Error).message}; attempt ${attempts}, next in ${Math.round(wait)} ms`,
      );
      await this.db.write((m) =>
        execute(
          m,
          `UPDATE slack_messages SET attempts = :attempts, next_attempt_at = :next,
             last_error = :error, claimed_until = NULL WHERE plan_id = :planId`,
          {
            planId: row.plan_id,
            attempts,
            next: Math.round(now + wait),
            error: (error as Error).message.slice(0, 1000),
          },
        ),
      );
    }
  }

  private async settle(
    planId: string,
    change: { ts?: string; channel?: string; drawnHash?: string; closed: boolean },
  ): Promise<void> {
    await this.db.write((m) =>
      execute(
        m,
        `UPDATE slack_messages SET ts = COALESCE(:ts, ts), channel = COALESCE(:channel, channel),
           drawn_hash = COALESCE(:drawnHash, drawn_hash), closed = :closed, attempts = 0,
           last_error = NULL, claimed_until = NULL WHERE plan_id = :planId`,
        {
          planId,
          ts: change.ts ?? null,
          channel: change.channel ?? null,
          drawnHash: change.drawnHash ?? null,
          closed: change.closed ? 1 : 0,
        },
      ),
    );
  }

  /** The message of `planId` (its channel and ts) once posted. */
  async messageOf(planId: string): Promise<{ channel: string; ts: string | null } | null> {
    const rows = await this.db.read((m) =>
      select<{ channel: string; ts: string | null }>(
        m,
        'SELECT channel, ts FROM slack_messages WHERE plan_id = :planId',
        { planId },
      ),
    );
    return rows[0] ?? null;
  }
}
