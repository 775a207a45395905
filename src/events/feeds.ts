import { Inject, Injectable } from '@nestjs/common';
import { Brackets, type EntityManager } from 'typeorm';
import { AuditEvent } from '../audit/audit-event.entity.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, select } from '../database/database.js';
import { Deployment, DeploymentStatus } from '../deployments/deployment.entity.js';
import {
  Plan,
  PLAN_FIELDS_BUT_CONTENT,
  PLAN_LARGE_FIELDS,
  PlanStatus,
} from '../plans/plan.entity.js';
import {
  activityTopic,
  auditRecordedTopic,
  deploymentChangedTopic,
  planPublishedTopic,
} from './events.service.js';
import { PgListener } from './pg-listener.js';
import { SubscriptionError } from './subscription.errors.js';

/** What a subscription resolver gets as `@Context('pubsub')` (Mercurius' per-subscription context). */
export interface SubscriptionPubSub {
  subscribe(topic: string): Promise<AsyncIterable<unknown>>;
  close?(): unknown;
}

/**
 * The three environment feeds (planPublished, auditEventRecorded, deploymentChanged), each
 * optionally resumed from a cursor `after`: the events after it first, read from the
 * database, then the live ones, with nothing missed or repeated at the seam.
 *
 * The seam: the live topic is subscribed (and buffers) before the catch-up is read, so an
 * event that commits after that read is heard live. An event that committed before the
 * read is in the catch-up; when it is also heard live (its notification may arrive after
 * the read), it is dropped: plans and audit events by id; a deployment's change when the
 * catch-up already holds that deployment in the same or a later state.
 */
@Injectable()
export class SubscriptionFeeds {
  private readonly replayLimit: number;

  constructor(
    private readonly db: Database,
    private readonly listener: PgListener,
    @Inject(CONFIG) config: Config,
  ) {
    this.replayLimit = config.subscriptions.replayLimit;
  }

  /**
   * Every publication of the environment in order; with `after` (a plan id of the
   * environment), first every plan published after it in (generation, sequence) order, the
   * order in which the pointer moved, each as its event announced it (status PUBLISHED).
   */
  planPublished(
    pubsub: SubscriptionPubSub,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    const cursor = after ? planPosition(environment, after) : null;
    return this.feed(
      pubsub,
      planPublishedTopic(environment),
      'planPublished',
      cursor && ((m) => this.publishedAfter(m, environment, cursor)),
      (replayed: Plan[]) => {
        const ids = new Set(replayed.map((plan) => plan.id));
        return (plan: Plan) => ids.has(plan.id);
      },
    );
  }

  /** Every audit event of the environment; with `after` (an audit event id), first those with a larger id. */
  auditEventRecorded(
    pubsub: SubscriptionPubSub,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    return this.feed(
      pubsub,
      auditRecordedTopic(environment),
      'auditEventRecorded',
      after ? (m) => this.auditAfter(m, environment, Number(after)) : null,
      (replayed: AuditEvent[]) => {
        const ids = new Set(replayed.map((event) => Number(event.id)));
        return (event: AuditEvent) => ids.has(Number(event.id));
      },
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
    pubsub: SubscriptionPubSub,
    environment: string,
    after: string | null | undefined,
  ): Promise<AsyncIterable<unknown>> {
    const sequence = after ? deploymentSequence(environment, after) : null;
    return this.feed(
      pubsub,
      deploymentChangedTopic(environment),
      'deploymentChanged',
      sequence != null ? (m) => this.deploymentsFrom(m, environment, sequence) : null,
      (replayed: Deployment[]) => {
        const seen = new Map(replayed.map((d) => [d.id, stateRank(d)]));
        return (d: Deployment) => {
          const rank = seen.get(d.id);
          return rank !== undefined && compareRanks(stateRank(d), rank) <= 0;
        };
      },
    );
  }

  /**
   * The audit events of every environment (the dashboard's one subscription; no cursor). It
   * does not complete when a lost LISTEN connection is back: the dashboard resubscribes
   * (and re-reads) when its socket closes, not on `complete`.
   */
  activityRecorded(pubsub: SubscriptionPubSub): Promise<AsyncIterable<unknown>> {
    return pubsub.subscribe(activityTopic());
  }

  /**
   * Subscribes `pubsub` to `topic`, replays what `replay` reads (when given), then the live
   * events. On PostgreSQL, a feed that was open while this instance's LISTEN connection was
   * lost is completed when the connection is back, so that its client resubscribes (with
   * `after`) instead of silently missing what was committed meanwhile.
   */
  private async feed<T>(
    pubsub: SubscriptionPubSub,
    topic: string,
    field: string,
    replay: ((m: EntityManager) => Promise<T[]>) | null,
    replayedAlready: (replayed: T[]) => (live: T) => boolean,
  ): Promise<AsyncIterable<unknown>> {
    const live = await pubsub.subscribe(topic);
    const stop = this.listener.onRecovery(() => pubsub.close?.());
    let replayed: T[] = [];
    try {
      if (replay) replayed = await this.db.read(replay);
      if (replayed.length > this.replayLimit) {
        throw new SubscriptionError(
          'CURSOR_TOO_OLD',
          `more than ${this.replayLimit} events follow the cursor (PLANFENCE_SUBSCRIPTION_REPLAY_LIMIT): read the current state, then subscribe without after`,
          { replayLimit: this.replayLimit },
        );
      }
    } catch (error) {
      stop();
      pubsub.close?.();
      throw error;
    }
    return resume(live, field, replayed, replayedAlready(replayed), stop);
  }

  private publishedAfter(
    m: EntityManager,
    environment: string,
    after: { generation: number; sequence: number },
  ): Promise<Plan[]> {
    return m
      .createQueryBuilder(Plan, 'p')
      .select(PLAN_FIELDS_BUT_CONTENT.map((column) => `p.${column}`))
      .where('p.environment = :environment', { environment })
      .andWhere('p.published_at IS NOT NULL')
      .andWhere(
        new Brackets((q) =>
          q
            .where('p.generation > :g', { g: after.generation })
            .orWhere('(p.generation = :g AND p.sequence > :s)', { s: after.sequence }),
        ),
      )
      .orderBy('p.generation', 'ASC')
      .addOrderBy('p.sequence', 'ASC')
      .limit(this.replayLimit + 1)
      .getMany()
      .then((plans) => plans.map((plan) => this.asPublished(plan)));
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

  private auditAfter(m: EntityManager, environment: string, after: number): Promise<AuditEvent[]> {
    return m
      .createQueryBuilder(AuditEvent, 'a')
      .where('a.environment = :environment', { environment })
      .andWhere('a.id > :after', { after })
      .orderBy('a.id', 'ASC')
      .limit(this.replayLimit + 1)
      .getMany();
  }

  private deploymentsFrom(
    m: EntityManager,
    environment: string,
    sequence: number,
  ): Promise<Deployment[]> {
    return m
      .createQueryBuilder(Deployment, 'd')
      .where('d.environment = :environment', { environment })
      .andWhere('d.sequence >= :sequence', { sequence })
      .orderBy('d.sequence', 'ASC')
      .limit(this.replayLimit + 1)
      .getMany();
  }
}

/** The replayed events, then the live ones not replayed already. */
async function* resume<T>(
  live: AsyncIterable<unknown>,
  field: string,
  replayed: T[],
  replayedAlready: (live: T) => boolean,
  ended: () => void,
): AsyncGenerator<unknown> {
  try {
    for (const object of replayed) yield { [field]: object };
    for await (const event of live) {
      if (!replayedAlready((event as Record<string, T>)[field])) yield event;
    }
  } finally {
    ended();
  }
}

/** `<environment>@<generation>.<sequence>` of this environment (validated by the args). */
function planPosition(environment: string, id: string): { generation: number; sequence: number } {
  const at = id.lastIndexOf('@');
  if (id.slice(0, at) !== environment) {
    throw new SubscriptionError(
      'BAD_USER_INPUT',
      `after must be a plan of ${environment} (got ${id})`,
    );
  }
  const [generation, sequence] = id
    .slice(at + 1)
    .split('.')
    .map(Number);
  return { generation, sequence };
}

/** The sequence of `<environment>#<sequence>` of this environment (validated by the args). */
function deploymentSequence(environment: string, id: string): number {
  const at = id.lastIndexOf('#');
  if (id.slice(0, at) !== environment) {
    throw new SubscriptionError(
      'BAD_USER_INPUT',
      `after must be a deployment of ${environment} (got ${id})`,
    );
  }
  return Number(id.slice(at + 1));
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
