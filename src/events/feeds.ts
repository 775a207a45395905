import { Inject, Injectable, Logger } from '@nestjs/common';
import { Brackets, type EntityManager, type ObjectLiteral, type SelectQueryBuilder } from 'typeorm';
import { AuditEvent } from '../model/audit-event.entity.js';
import { allowsEnvironment } from '../auth/scope.js';
import { exists } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, select } from '../database/database.js';
import { Deployment, DeploymentStatus } from '../model/deployment.entity.js';
import {
  Plan,
  PLAN_FIELDS_BUT_CONTENT,
  PLAN_LARGE_FIELDS,
  PlanStatus,
} from '../model/plan.entity.js';
import {
  activityTopic,
  auditRecordedTopic,
  deploymentChangedTopic,
  planPublishedTopic,
} from './events.service.js';
import { RequestLimitError } from '../common/limit.errors.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { loopTurns } from '../common/loop-turns.js';
import { PgListener } from '../database/pg-listener.js';
import { ReplayBudget } from './replay-budget.js';
import { SubscriptionError } from './subscription.errors.js';
import { DeploymentId, PlanId } from '../common/ids.js';

/** What a subscription resolver gets as `@Context('pubsub')` (Mercurius' per-subscription context). */
export interface SubscriptionPubSub {
  subscribe(topic: string): Promise<AsyncIterable<unknown>>;
  close?(): unknown;
}

/** The slice of a subscription's GraphQL context (`@Context()`) the feeds read. */
export interface SubscriptionCall {
  pubsub: SubscriptionPubSub;
  req?: { principal?: { name: string; environments?: string[] | null } };
  /** The socket the subscription runs on (SocketGate). */
  planfenceSocket?: { readonly open: boolean; readonly socket: { bufferedAmount: number } };
  /** What one event of this subscription costs, by the query cost estimate (request-limits). */
  eventCost?: number;
}

/** Bytes a replayed event counts for besides its large fields (ids, names, times). */
const EVENT_BYTES = 512;

/** One feed's catch-up, read page by page from cursor `C`. */
interface Replay<T, C> {
  from: C;
  /** Up to `limit` events after `cursor`, in replay order. */
  page(m: EntityManager, cursor: C, limit: number): Promise<T[]>;
  /** How many events follow `cursor`, counted up to `limit`. */
  count(m: EntityManager, cursor: C, limit: number): Promise<number>;
  /**
   * The bytes of the large fields (plan content and summary) of the first `limit` events
   * after `cursor`, when the subscription selects them; absent: the events carry none.
   */
  bytes?(m: EntityManager, cursor: C, limit: number): Promise<number>;
  /** The cursor after `last`. */
  after(last: T): C;
}

/** Remembers what the catch-up sent, and tells which live events it sent already. */
interface Seam<T> {
  replayed(item: T): void;
  already(live: T): boolean;
}

/** Events read from the database at a time while replaying. */
const REPLAY_PAGE = 100;
/** A replay reads its next page only once its socket holds less than this unsent. */
const SOCKET_HIGH_WATER = 1024 * 1024;

/**
 * The three environment feeds (planPublished, auditEventRecorded, deploymentChanged), each
 * optionally resumed from a cursor `after`: the events after it first, read from the
 * database, then the live ones, with nothing missed or repeated at the seam.
 *
 * The seam: the live topic is subscribed (and buffers) before the catch-up is counted, so
 * an event that commits after that count is heard live. An event that committed before it
 * is among the first `count` events of the catch-up; when it is also heard live (its
 * notification may arrive later), it is dropped: plans and audit events by id; a
 * deployment's change when the catch-up already held that deployment in the same or a
 * later state.
 *
 * A catch-up is counted first (bounded by the replay limit), priced with that count like a
 * query (each event the cost of the subscription's selection: PLANFENCE_MAX_QUERY_COST),
 * charged to the principal's ReplayBudget, then read page by page: the next page only when
 * the socket has sent most of the previous one, and none once the socket is closed or the
 * subscription ended.
 */
@Injectable()
export class SubscriptionFeeds {
  private readonly logger = new Logger('Subscriptions');
  private readonly replayLimit: number;
  private readonly maxCost: number;
  /** A subscription whose cost per event reaches this selects a large field (content, summary). */
  private readonly largeFieldCost: number;
  private readonly budget: ReplayBudget;

  constructor(
    private readonly db: Database,
    private readonly listener: PgListener,
    private readonly metrics: MetricsService,
    @Inject(CONFIG) config: Config,
  ) {
    this.replayLimit = config.subscriptions.replayLimit;
    this.maxCost = config.limits.maxCost;
    this.largeFieldCost = Math.max(2, Math.ceil(config.maxPlanBytes / 1024));
    this.budget = new ReplayBudget(
      config.subscriptions.replayEventsPerMinute,
      config.subscriptions.maxReplaysPerPrincipal,
      config.subscriptions.replayBytesPerMinute,
    );
  }

  /**
   * Every publication of the environment in order; with `after` (a plan id of the
   * environment), first every plan published after it in (generation, sequence) order, the
   * order in which the pointer moved, each as its event announced it (status PUBLISHED).
   */
  planPublished(
    call: SubscriptionCall,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    const cursor = after ? planPosition(environment, after) : null;
    const published = (m: EntityManager, c: PlanCursor) =>
      m
        .createQueryBuilder(Plan, 'p')
        .where('p.environment = :environment', { environment })
        .andWhere('p.published_at IS NOT NULL')
        .andWhere(
          new Brackets((q) =>
            q
              .where('p.generation > :g', { g: c.generation })
              .orWhere('(p.generation = :g AND p.sequence > :s)', { s: c.sequence }),
          ),
        )
        .orderBy('p.generation', 'ASC')
        .addOrderBy('p.sequence', 'ASC');
    return this.feed<Plan, PlanCursor>(
      call,
      environment,
      planPublishedTopic(environment),
      'planPublished',
      cursor && {
        from: cursor,
        page: (m, c, limit) =>
          published(m, c)
            .select(PLAN_FIELDS_BUT_CONTENT.map((column) => `p.${column}`))
            .limit(limit)
            .getMany()
            .then((plans) => plans.map((plan) => this.asPublished(plan))),
        count: (m, c, limit) => countOf(published(m, c).select('p.id', 'id'), limit),
        bytes:
          (call.eventCost ?? 0) >= this.largeFieldCost
            ? (m, c, limit) =>
                sumOf(
                  published(m, c).select(
                    "LENGTH(COALESCE(p.content, '')) + LENGTH(COALESCE(p.summary, ''))",
                    'n',
                  ),
                  limit,
                )
            : undefined,
        after: (plan) => ({ generation: plan.generation, sequence: plan.sequence }),
      },
      byId((plan: Plan) => plan.id),
    );
  }

  /** Every audit event of the environment; with `after` (an audit event id), first those with a larger id. */
  auditEventRecorded(
    call: SubscriptionCall,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    const following = (m: EntityManager, id: number) =>
      m
        .createQueryBuilder(AuditEvent, 'a')
        .where('a.environment = :environment', { environment })
        .andWhere('a.id > :after', { after: id })
        .orderBy('a.id', 'ASC');
    return this.feed<AuditEvent, number>(
      call,
      environment,
      auditRecordedTopic(environment),
      'auditEventRecorded',
      after
        ? {
            from: Number(after),
            page: (m, id, limit) => following(m, id).limit(limit).getMany(),
            count: (m, id, limit) => countOf(following(m, id).select('a.id', 'id'), limit),
            after: (event) => Number(event.id),
          }
        : null,
      byId((event: AuditEvent) => Number(event.id)),
    );
  }

  /**
   * Every change of the environment's deployments; with `after` (a deployment id of the
   * environment), first the state, as of now, of that deployment and of every later one,
   * in sequence order. A deployment before the newest one no longer changes (a deployment
   * starts only when none is active), so these states hold every change since: changes of
   * one deployment made while the subscriber was away arrive as its latest state.
   */
  deploymentChanged(
    call: SubscriptionCall,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    const sequence = after ? deploymentSequence(environment, after) : null;
    const from = (m: EntityManager, first: number) =>
      m
        .createQueryBuilder(Deployment, 'd')
        .where('d.environment = :environment', { environment })
        .andWhere('d.sequence >= :sequence', { sequence: first })
        .orderBy('d.sequence', 'ASC');
    const seen = new Map<string, [number, number, number]>();
    return this.feed<Deployment, number>(
      call,
      environment,
      deploymentChangedTopic(environment),
      'deploymentChanged',
      sequence != null
        ? {
            from: sequence,
            page: (m, first, limit) => from(m, first).limit(limit).getMany(),
            count: (m, first, limit) => countOf(from(m, first).select('d.id', 'id'), limit),
            after: (d) => d.sequence + 1,
          }
        : null,
      {
        replayed: (d) => void seen.set(d.id, stateRank(d)),
        already: (d) => {
          const rank = seen.get(d.id);
          return rank !== undefined && compareRanks(stateRank(d), rank) <= 0;
        },
      },
    );
  }

  /**
   * The audit events of every environment (the dashboard's one subscription; no cursor). It
   * does not complete when a lost LISTEN connection is back: the dashboard resubscribes
   * (and re-reads) when its socket closes, not on `complete`.
   */
  async activityRecorded(call: SubscriptionCall): Promise<AsyncIterable<unknown>> {
    const live = await call.pubsub.subscribe(activityTopic());
    this.metrics.subscriptions.inc({ field: 'activityRecorded' });
    // Read at each event: a socket's principal is refreshed when its access changes.
    return only(live, (event) =>
      allowsEnvironment(
        call.req?.principal?.environments,
        (event as { activityRecorded: AuditEvent }).activityRecorded.environment,
      ),
    );
  }

  /**
   * Subscribes to `topic`, replays what `replay` reads (when given), then the live events.
   * On PostgreSQL, a feed that was open while this instance's LISTEN connection was lost is
   * completed when the connection is back, so that its client resubscribes (with `after`)
   * instead of silently missing what was committed meanwhile.
   */
  private async feed<T, C>(
    call: SubscriptionCall,
    environment: string,
    topic: string,
    field: string,
    replay: Replay<T, C> | null,
    seam: Seam<T>,
  ): Promise<AsyncIterable<unknown>> {
    const { pubsub } = call;
    const live = await pubsub.subscribe(topic);
    this.metrics.subscriptions.inc({ field });
    const stop = this.listener.onRecovery(() => pubsub.close?.());
    let pages: AsyncIterable<T[]> | null = null;
    let endReplay = () => {};
    const principal = call.req?.principal?.name ?? '';
    let count = 0;
    let bytes = 0;
    try {
      count = await this.db.read(async (m) => {
        // As the queries on an environment answer: an unknown one is NOT_FOUND, not a silent feed.
        if (!(await exists(m, Environment, { name: environment })))
          throw EnvironmentError.notFound(environment);
        return replay ? replay.count(m, replay.from, this.replayLimit + 1) : 0;
      });
      if (replay) {
        if (count > this.replayLimit) {
          throw new SubscriptionError(
            'CURSOR_TOO_OLD',
            `more than ${this.replayLimit} events follow the cursor (PLANFENCE_SUBSCRIPTION_REPLAY_LIMIT): read the current state, then subscribe without after`,
            { replayLimit: this.replayLimit },
          );
        }
        const cost = count * Math.max(1, call.eventCost ?? 1);
        if (cost > this.maxCost) {
          throw new RequestLimitError(
            'cost',
            this.maxCost,
            `replaying the ${count} events after the cursor has an estimated cost of ${cost}; the limit is ${this.maxCost} (PLANFENCE_MAX_QUERY_COST: the subscription's cost per event times the events): select less (plan content), or resume from a later cursor`,
          );
        }
        if (count > 0) {
          bytes =
            count * EVENT_BYTES +
            (replay.bytes ? await this.db.read((m) => replay.bytes!(m, replay.from, count)) : 0);
          endReplay = this.budget.admit(principal, count, bytes);
          pages = this.pages(call, replay, count);
        }
      }
    } catch (error) {
      stop();
      pubsub.close?.();
      if (replay) {
        const code = (error as { code?: unknown }).code;
        this.logger.warn(
          `replay refused: ${field}(${environment}) for ${principal || '(nobody)'}, ${count} events, ${bytes} bytes: ${typeof code === 'string' ? code : 'error'}: ${(error as Error).message}`,
        );
      }
      throw error;
    }
    let sent = 0;
    return resume(
      live,
      field,
      pages,
      seam,
      () => {
        sent = count;
        endReplay();
      },
      () => {
        if (pages && sent < count) {
          this.logger.warn(
            `replay cut: ${field}(${environment}) for ${principal || '(nobody)'} ended after ${sent} of ${count} events (the socket closed or the subscription ended)`,
          );
        }
        endReplay();
        stop();
      },
      () => sent++,
    );
  }

  /** The catch-up's first `count` events, a page at a time, read only while the socket keeps up. */
  private async *pages<T, C>(
    call: SubscriptionCall,
    replay: Replay<T, C>,
    count: number,
  ): AsyncGenerator<T[]> {
    const socket = call.planfenceSocket;
    let cursor = replay.from;
    let left = count;
    while (left > 0) {
      while (socket?.open && socket.socket.bufferedAmount > SOCKET_HIGH_WATER) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      if (socket && !socket.open) return;
      // The rest of the service is served between two pages (common/loop-turns.ts).
      await loopTurns.turn();
      if (socket && !socket.open) return;
      const size = Math.min(REPLAY_PAGE, left);
      const page = await this.db.read((m) => replay.page(m, cursor, size));
      if (page.length) yield page;
      if (page.length < size) return;
      left -= page.length;
      cursor = replay.after(page[page.length - 1]);
    }
  }

  /** A plan as its publication announced it, its large fields (content...) read when selected. */
  private asPublished(plan: Plan): Plan {
    plan.status = PlanStatus.PUBLISHED;
    for (const [field, column] of Object.entries(PLAN_LARGE_FIELDS)) {
      let value: Promise<unknown> | null = null;
      Object.defineProperty(plan, field, {
        enumerable: true,
        configurable: true,
        get: () =>
          (value ??= this.db
            .read((m) =>
              select<{ value: unknown }>(m, `SELECT ${column} AS value FROM plans WHERE id = :id`, {
                id: plan.id,
              }),
            )
            .then(([row]) => row?.value ?? (field === 'content' ? '' : null))),
      });
    }
    return plan;
  }
}

type PlanCursor = { generation: number; sequence: number };

/** Rows of `query`, counted up to `limit` (only their ids are read). */
async function countOf(query: SelectQueryBuilder<ObjectLiteral>, limit: number): Promise<number> {
  return (await query.limit(limit).getRawMany()).length;
}

/** The sum of column `n` over the first `limit` rows of `query`. */
async function sumOf(query: SelectQueryBuilder<ObjectLiteral>, limit: number): Promise<number> {
  const rows = await query.limit(limit).getRawMany<{ n: number | string | null }>();
  return rows.reduce((sum, row) => sum + Number(row.n ?? 0), 0);
}

/** The events of `live` that `keep`. */
async function* only(
  live: AsyncIterable<unknown>,
  keep: (event: unknown) => boolean,
): AsyncGenerator<unknown> {
  for await (const event of live) if (keep(event)) yield event;
}

/** The seam of a feed whose events are told apart by `key`. */
function byId<T>(key: (item: T) => string | number): Seam<T> {
  const ids = new Set<string | number>();
  return { replayed: (item) => void ids.add(key(item)), already: (item) => ids.has(key(item)) };
}

/** The replayed events, then the live ones not replayed already. */
async function* resume<T>(
  live: AsyncIterable<unknown>,
  field: string,
  pages: AsyncIterable<T[]> | null,
  seam: Seam<T>,
  replayDone: () => void,
  ended: () => void,
  replayedOne: () => void,
): AsyncGenerator<unknown> {
  try {
    if (pages) {
      for await (const page of pages) {
        for (const object of page) {
          seam.replayed(object);
          // One replayed event per turn of the event loop: its large fields are read and
          // serialized (170 KB of plan content, say) while nothing else waits behind it.
          await loopTurns.turn();
          yield { [field]: object };
          replayedOne();
        }
      }
    }
    replayDone();
    for await (const event of live) {
      if (!seam.already((event as Record<string, T>)[field])) yield event;
    }
  } finally {
    ended();
  }
}

/** `<environment>@<generation>.<sequence>` of this environment (validated by the args). */
function planPosition(environment: string, id: string): { generation: number; sequence: number } {
  const parsed = PlanId.parse(id);
  if (parsed?.environment !== environment) {
    throw new SubscriptionError(
      'BAD_USER_INPUT',
      `after must be a plan of ${environment} (got ${id})`,
    );
  }
  return { generation: parsed.generation, sequence: parsed.sequence };
}

/** The sequence of `<environment>#<sequence>` of this environment (validated by the args). */
function deploymentSequence(environment: string, id: string): number {
  const parsed = DeploymentId.parse(id);
  if (parsed?.environment !== environment) {
    throw new SubscriptionError(
      'BAD_USER_INPUT',
      `after must be a deployment of ${environment} (got ${id})`,
    );
  }
  return parsed.sequence;
}

/**
 * Where a deployment's state stands among its changes: a started or revived one (IN_PROGRESS)
 * before its lapse (UNKNOWN, same heartbeat), a revival after a lapse (a later heartbeat
 * deadline), and an ended one (finished or reconciled) after everything.
 */
function stateRank(d: Deployment): [number, number, number] {
  return [
    d.finishedAt != null ? 1 : 0,
    new Date(d.heartbeatExpiresAt).getTime(),
    d.status === DeploymentStatus.UNKNOWN ? 1 : 0,
  ];
}

function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}
