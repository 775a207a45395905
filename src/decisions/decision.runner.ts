import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuditEvent, AuditOutcome } from '../model/audit-event.entity.js';
import { auditEvent, AuditService } from '../audit/audit.service.js';
import { currentVia, type Via } from '../common/via.js';
import { Clock, SystemClock } from '../common/clock.js';
import { type DomainError, isDomainError } from '../common/errors.js';
import { Database, isTokenCheckFailure, type TokenCheck } from '../database/database.js';
import { AuthError } from '../auth/auth.errors.js';
import { type Person, personLater, withPerson } from '../auth/person.model.js';
import {
  type IdempotentCall,
  IdempotencyService,
  type RememberedOutcome,
} from '../idempotency/idempotency.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { EventsService } from '../events/events.service.js';
import type { OutboxEvent } from '../outbox/outbox-event.js';
import {
  deploymentEvent,
  environmentEvent,
  leaseTicketEvent,
  Outbox,
  planEvent,
} from '../outbox/outbox.service.js';
import { DecisionTx, type Effect, type OutboxEffect } from '../fencing/effects.js';
import type { Transaction } from '../database/transaction.js';
import { Plan, PlanStatus } from '../model/plan.entity.js';
import {
  REFUSE_STALE_ON_THREAD,
  type RefusalOnThread,
  type SubmitOnThread,
} from '../fencing/submit-on-thread.js';
import type { FenceError } from '../fencing/fence.errors.js';
import { exists, findOneOrFail, takeDrawnId } from '../database/rows.js';
import { atOnceDeclined } from '../fencing/plan-writes.js';
import { submitRecord } from './submit-at-once.js';
import { Environment } from '../model/environment.entity.js';

export interface Decision {
  action: string;
  environment: string;
  actor: string;
  generation?: number | null;
  planId?: string | null;
  /**
   * The request's door, taken from the caller's context when the decision starts (see
   * currentVia); null for the service's own decisions, which must say so.
   */
  via?: Via | null;
  /**
   * The caller's token, when its decision must check it (tokenCheckOf: the guard took the
   * principal from memory on PostgreSQL): checked in the transaction's first round trip; if
   * it no longer names the actor, unrevoked, nothing commits and the caller gets
   * UNAUTHENTICATED.
   */
  token?: TokenCheck;
}

/** What the audit log keeps of an accepted decision. */
export type Summary = Pick<Decision, 'generation' | 'planId'> & { detail?: string };

/** The decision with its door: the caller's (currentVia) unless it names one. */
function withDoor(request: Decision): Decision {
  return { ...request, via: request.via === undefined ? currentVia() : request.via };
}

type Outcome<T> = { result: T } | { error: DomainError };

/**
 * Runs a protected write as one transaction: the decision, its audit event (R12) and, with
 * an idempotency key, its remembered outcome (R9) commit together. A rejection commits its
 * audit event (and remembered error) and is thrown after the commit; a rejection that names
 * an environment that does not exist is audited nowhere (there is no log to keep it in).
 *
 * The guard (src/fencing/) only decides: each attempt hands its write a DecisionTx
 * (src/fencing/effects.ts), where the write leaves what else its decision causes as values
 * (`effects`), and this runner alone sends them, in
 * the order decided and before the decision's own audit event: the audit and outbox rows in
 * the deciding transaction, the subscription announcements handed to EventsService in it
 * (heard only after the commit), the metrics counted after the commit. A rejection keeps the
 * effects decided before it (what holds whatever the decision, R16, R19); a transaction that
 * rolls back sends none.
 */
@Injectable()
export class DecisionRunner {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly audit: AuditService,
    private readonly idempotency: IdempotencyService,
    private readonly metrics: MetricsService,
    private readonly events: EventsService,
    private readonly outbox: Outbox,
  ) {}

  /**
   * A write that is no client's decision (the retention job's sweep), made at `now`: `work`
   * runs in one transaction, and the effects the guard decided in it are sent as a
   * decision's are. No audit event of its own, no decision metric.
   */
  write<T>(now: number, work: (tx: DecisionTx) => Promise<T>): Promise<T> {
    return this.db.write(async (m) => {
      const tx = new DecisionTx(m, now);
      const result = await work(tx);
      await this.send(m, tx.effects);
      return result;
    });
  }

  async decide<T>(
    request: Decision,
    work: (tx: DecisionTx) => Promise<T>,
    summarize: (result: T) => Summary = () => ({}),
  ): Promise<T> {
    const decision = withDoor(request);
    const startedAt = performance.now();
    return this.settle(
      decision,
      startedAt,
      await this.transaction(decision, (m) => this.attempt(m, decision, work, summarize)),
    );
  }

  /** A decision that yields a plan and may carry an idempotency key: a repeated call replays the first outcome. */
  decidePlan(
    decision: Decision,
    call: IdempotentCall | null,
    work: (tx: DecisionTx) => Promise<Plan>,
    /** What the accepted decision's audit event says besides the plan (e.g. a break-glass reason). */
    detail: (plan: Plan) => string | undefined = () => undefined,
  ): Promise<Plan> {
    return this.decideOnce(decision, call, work, planResult(detail));
  }

  /**
   * A decision that may carry an idempotency key (R9): the first outcome is remembered in
   * the decision's transaction, and a repeated call replays it (`replay` reads the result
   * back from what `remember` kept) without a second effect or audit event.
   */
  async decideOnce<T>(
    request: Decision,
    call: IdempotentCall | null,
    work: (tx: DecisionTx) => Promise<T>,
    result: Remembering<T>,
  ): Promise<T> {
    const decision = withDoor(request);
    const startedAt = performance.now();
    const outcome = await this.transaction(decision, (m) =>
      this.once(m, decision, call, work, result),
    );
    return this.settle(decision, startedAt, outcome);
  }

  /**
   * decidePlan for a transaction that does not wait for the decision's answer (PostgreSQL):
   * `atOnce` sends the statement (planfence_submit_plan_at_once), which also reads the clock
   * (when the clock is the database's; else it is given `now`), checks the call's idempotency
   * record and records what the decision adds (src/decisions/submit-at-once.ts), and the
   * COMMIT goes with it: one round trip. A submit it does not admit (its transaction commits
   * nothing: a rejection, a remembered call), and one whose admission expired proposals
   * (rolled back), is decided again by decidePlan (`work`, the guard's statements). `detail`
   * is given the plan as the statement stores it but for the fields the database decides.
   * Submits at once of one environment that wait for its turn together share one
   * transaction (Database.writeGatheredFor).
   */
  async decidePlanAtOnce(
    request: Decision,
    call: IdempotentCall | null,
    atOnce: (
      m: Transaction,
      now: number | null,
      record: (provisional: Plan) => object,
    ) => Promise<Plan | null>,
    work: (tx: DecisionTx) => Promise<Plan>,
    detail: (plan: Plan) => string | undefined,
  ): Promise<Plan> {
    const decision = withDoor(request);
    const startedAt = performance.now();
    let plan: Plan | null = null;
    try {
      // The stored plan's promise settles with the transaction's answers: kept in an object,
      // so that the transaction does not wait for it before its COMMIT is sent.
      const sent = await this.transaction(
        decision,
        async (m) => {
          const now = this.clock.inDatabase ? null : await this.clock.now(m);
          const stored = atOnce(m, now, (provisional) => {
            const { generation, detail: said } = planResult(detail).summarize(provisional);
            return submitRecord(provisional, {
              audit: { ...decision, generation, detail: said },
              call,
              idempotencyTtlMs: this.idempotency.ttlMs,
            });
          });
          this.outbox.recordedBy(m);
          return { stored };
        },
        true,
      );
      plan = await sent.stored;
    } catch (error) {
      if (!atOnceDeclined(error)) throw error;
    }
    // Not admitted (nothing written), or rolled back: decided by the guard's statements.
    if (!plan) return this.decidePlan(request, call, work, detail);
    return this.settle(decision, startedAt, { result: plan });
  }

  /**
   * decidePlan made by the SQLite writer thread (Database.writesOnThread), as decidePlanAtOnce
   * is by PostgreSQL's statement: `onThread` hands the submit to the thread with the time
   * (null: the thread reads the system's clock as it decides) and what the decision records
   * besides the plan (the same encoders' rows), and is given
   * what to announce once its group committed (the plan's event when it published, then
   * the audit event's; the outbox's listeners), before the submit is answered. A submit the
   * thread does not admit (nothing written) is decided by decidePlan (`work`, the guard's
   * statements), which names the rejection, replays the remembered call or announces the
   * proposals that expired.
   */
  async decidePlanOnThread(
    request: Decision,
    call: IdempotentCall | null,
    onThread: (
      now: number | null,
      record: (provisional: Plan) => SubmitOnThread['record'],
      committed: (plan: Plan, auditId: number) => void,
    ) => Promise<Plan | null>,
    work: (tx: DecisionTx) => Promise<Plan>,
    detail: (plan: Plan) => string | undefined,
  ): Promise<Plan> {
    const decision = withDoor(request);
    const startedAt = performance.now();
    const summarize = planResult(detail).summarize;
    const plan = await onThread(
      // The system's clock is read by the thread as it decides, after the write's wait in
      // line, as the guard's statements read it in their transaction.
      this.clock instanceof SystemClock ? null : await this.clock.now(),
      (provisional) => {
        const { generation, detail: said } = summarize(provisional);
        return submitRecord(provisional, {
          audit: { ...decision, generation, detail: said },
          call,
          idempotencyTtlMs: this.idempotency.ttlMs,
          notifications: false,
        }) as SubmitOnThread['record'];
      },
      (stored, auditId) => {
        if (stored.status === PlanStatus.PUBLISHED) this.events.committed('plan', stored);
        const { generation, detail: said } = summarize(stored);
        const event = auditEvent(stored.submittedAt.getTime(), {
          ...decision,
          generation,
          detail: said,
          planId: stored.id,
          outcome: AuditOutcome.ACCEPTED,
        });
        this.events.committed('audit', Object.assign(event, { id: auditId }));
        this.outbox.committed();
      },
    );
    if (!plan) return this.decidePlan(request, call, work, detail);
    return this.settle(decision, startedAt, { result: plan });
  }

  /**
   * A submit's refusal `error` (STALE_GENERATION below `fence`) made by the SQLite writer
   * thread (REFUSE_STALE_ON_THREAD), with its audit event and the call's remembered refusal,
   * as the guard's statements would make it; announced once its group committed, and thrown.
   * Returns only if the thread declined it (the fence moved, the call is remembered): nothing
   * was written, and the caller decides the submit by the guard's statements.
   */
  async refuseOnThread(
    request: Decision,
    call: IdempotentCall | null,
    error: FenceError,
    refusal: Pick<RefusalOnThread, 'principal' | 'generation' | 'policyVersion' | 'fence'>,
  ): Promise<void> {
    const decision = withDoor(request);
    const startedAt = performance.now();
    const now = await this.clock.now();
    const audit = auditEvent(now, {
      ...decision,
      outcome: AuditOutcome.REJECTED,
      code: error.code,
      detail: error.message,
    });
    const outcome = await this.db.writeOnThread(
      REFUSE_STALE_ON_THREAD,
      {
        ...refusal,
        environment: decision.environment,
        now,
        idempotencyPrincipal: call?.principal ?? null,
        idempotencyKey: call?.key ?? null,
        audit: {
          environment: audit.environment,
          actor: audit.actor,
          action: audit.action,
          generation: refusal.generation,
          outcome: audit.outcome,
          code: error.code,
          detail: error.message,
          via: audit.via,
        },
        idempotency: call && {
          principal: call.principal,
          key: call.key,
          operation: call.operation,
          fingerprint: call.fingerprint,
          ttlMs: this.idempotency.ttlMs,
          errorCode: error.code,
          errorMessage: error.message,
          errorDetails: JSON.stringify(error.details),
        },
      },
      (done) => {
        if (done.outcome === 'refused')
          this.events.committed('audit', Object.assign(audit, { id: done.auditId }));
      },
    );
    if (outcome.outcome === 'refused') this.settle(decision, startedAt, { error });
  }

  /**
   * A refusal decided before any guard write (src/access/: a role, or an environment outside
   * the token's, R27; a Slack action refused at the door): audited as a rejected decision
   * is, in a transaction of its own, in the environment's log when the environment exists.
   * The caller answers the refusal.
   */
  async refused(request: Decision, refusal: { code: string; message: string }): Promise<void> {
    const decision = withDoor(request);
    await this.transaction(decision, async (m) =>
      this.auditRejection(m, await this.clock.now(m), decision, refusal.code, refusal.message),
    );
  }

  /**
   * The decision's transaction, with its token check (Decision.token). `atOnce`: `work`
   * waits for no answer, so the transaction may be shared (Database.writeGatheredFor).
   */
  private async transaction<T>(
    decision: Decision,
    work: (m: Transaction) => Promise<T>,
    atOnce = false,
  ): Promise<T> {
    try {
      return await (atOnce
        ? this.db.writeGatheredFor(decision.environment, work, decision.token)
        : this.db.writeFor(decision.environment, work, decision.token));
    } catch (error) {
      if (isTokenCheckFailure(error)) throw new AuthError('UNAUTHENTICATED', error.message);
      throw error;
    }
  }

  private async once<T>(
    m: Transaction,
    decision: Decision,
    call: IdempotentCall | null,
    work: (tx: DecisionTx) => Promise<T>,
    result: Remembering<T>,
  ): Promise<Outcome<T>> {
    if (!call) return this.attempt(m, decision, work, result.summarize);
    const now = await this.clock.now(m);
    let remembered;
    try {
      remembered = await this.idempotency.recall(m, call, now);
    } catch (error) {
      return this.rejected(
        m,
        now,
        decision,
        error,
        personLater(m, decision.action, decision.actor),
      );
    }
    if (remembered) {
      if ('error' in remembered) return remembered;
      const replayed = result.replay(m, remembered);
      // The fingerprint covers the operation, so a record always holds what its operation returns.
      if (!replayed) throw new Error(`idempotency record of ${call.operation} holds no result`);
      return { result: await replayed };
    }
    const first = await this.attempt(m, decision, work, result.summarize, now);
    await this.remember(m, call, now, first, result);
    return first;
  }

  private remember<T>(
    m: Transaction,
    call: IdempotentCall,
    now: number,
    first: Outcome<T>,
    result: Remembering<T>,
  ): Promise<void> {
    return this.idempotency.remember(
      m,
      call,
      now,
      'result' in first ? result.remember(first.result) : { error: first.error },
    );
  }

  private async attempt<T>(
    m: Transaction,
    decision: Decision,
    work: (tx: DecisionTx) => Promise<T>,
    summarize: (result: T) => Summary,
    at?: number,
  ): Promise<Outcome<T>> {
    const now = at ?? (await this.clock.now(m));
    const tx = new DecisionTx(m, now);
    // R43: the person behind the actor, read with the decision's first statements.
    const person = personLater(m, decision.action, decision.actor);
    try {
      const result = await work(tx);
      await this.send(m, tx.effects);
      const { detail: said, ...summary } = summarize(result);
      // R43: a decision by a signed-in person names the person.
      const detail = await withPerson(said, person);
      await this.audit.record(
        m,
        now,
        { ...decision, ...summary, detail, outcome: AuditOutcome.ACCEPTED },
        await takeDrawnId(m, AuditEvent),
      );
      return { result };
    } catch (error) {
      return this.rejected(m, now, decision, error, person, tx.effects);
    }
  }

  private async rejected(
    m: Transaction,
    now: number,
    decision: Decision,
    error: unknown,
    person: Promise<Person | null> | null = null,
    /** What the guard decided before it rejected: it holds whatever the decision. */
    decided: readonly Effect[] = [],
  ): Promise<{ error: DomainError }> {
    if (!isDomainError(error)) throw error;
    await this.send(m, decided);
    await this.auditRejection(m, now, decision, error.code, withPerson(error.message, person));
    return { error };
  }

  private async auditRejection(
    m: Transaction,
    now: number,
    decision: Decision,
    code: string,
    detail: string | undefined | Promise<string | undefined>,
  ): Promise<void> {
    // An environment's audit log starts with the environment: a rejection naming one that
    // does not exist (yet) is answered but leaves no row that a later environment of that
    // name would inherit.
    if (!(await exists(m, Environment, { name: decision.environment }))) return;
    await this.audit.record(m, now, {
      ...decision,
      outcome: AuditOutcome.REJECTED,
      code,
      detail: await detail,
    });
  }

  private settle<T>(decision: Decision, startedAt: number, outcome: Outcome<T>): T {
    const code = 'error' in outcome ? outcome.error.code : null;
    this.metrics.decided(decision.action, decision.environment, code, startedAt);
    if ('error' in outcome) throw outcome.error;
    return outcome.result;
  }

  /** The guard's effects, in the order it decided them (see the class comment). */
  private async send(m: Transaction, effects: readonly Effect[]): Promise<void> {
    // The outbox rows go in together, after the audit rows: the two tables do not share an order.
    const events: OutboxEvent[] = [];
    for (const effect of effects) {
      switch (effect.kind) {
        case 'audit':
          await this.audit.record(m, effect.at, effect.entry);
          break;
        case 'outbox':
          events.push(outboxEventOf(effect));
          break;
        case 'planPublished':
          this.events.planPublished(m, effect.plan);
          break;
        case 'deploymentChanged':
          this.events.deploymentChanged(m, effect.deployment);
          break;
        case 'leaseTicketChanged':
          this.events.leaseTicketChanged(m, effect.id);
          break;
        case 'deploymentEnded': {
          const { outcome } = effect;
          this.db.afterCommit(m, () => this.metrics.deploymentEnded(outcome));
          break;
        }
        default: {
          // Every kind the guard can decide is sent: one it cannot name fails the decision.
          const unknown: never = effect;
          throw new Error(`an effect of unknown kind: ${JSON.stringify(unknown)}`);
        }
      }
    }
    await this.outbox.record(m, events);
  }
}

/** How a decision's result is summarized for the audit log, remembered and replayed (R9). */
interface Remembering<T> {
  summarize: (result: T) => Summary;
  remember: (result: T) => RememberedOutcome;
  replay: (m: EntityManager, remembered: RememberedOutcome) => Promise<T> | null;
}

function planResult(detail: (plan: Plan) => string | undefined): Remembering<Plan> {
  return {
    summarize: (plan) => ({ planId: plan.id, generation: plan.generation, detail: detail(plan) }),
    remember: (plan) => ({ planId: plan.id }),
    replay: (m, remembered) =>
      'planId' in remembered ? findOneOrFail(m, Plan, { id: remembered.planId }) : null,
  };
}

function outboxEventOf(e: OutboxEffect): OutboxEvent {
  switch (e.subject) {
    case 'plan':
      return planEvent(e.type, e.plan, e.actor, e.at);
    case 'deployment':
      return deploymentEvent(e.type, e.deployment, e.actor, e.at);
    case 'environment':
      return environmentEvent(e.type, e.environment, e.actor, e.at);
    case 'leaseTicket':
      return leaseTicketEvent(e.type, e.ticket, e.actor, e.at);
    case 'event':
      return e.event;
  }
}
