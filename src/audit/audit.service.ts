import { Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { EventsService } from '../events/events.service.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import { AuditEvent, AuditOutcome } from '../model/audit-event.entity.js';
import { exists, insertRow, insertRowLater } from '../database/rows.js';
import type { Via } from '../common/via.js';

export interface AuditEntry {
  environment: string;
  actor: string;
  action: string;
  generation?: number | null;
  planId?: string | null;
  outcome: AuditOutcome;
  code?: string | null;
  detail?: string | null;
  /** The door of the request that caused it; null for the service's own decisions. */
  via?: Via | null;
}

/** The event `entry` records at `at`, as its row stores it (without its id). */
export function auditEvent(at: number, entry: AuditEntry): AuditEvent {
  return Object.assign(new AuditEvent(), {
    at: new Date(at),
    environment: entry.environment,
    actor: entry.actor,
    action: entry.action,
    generation: entry.generation ?? null,
    planId: entry.planId ?? null,
    outcome: entry.outcome,
    code: entry.code ?? null,
    detail: entry.detail ?? null,
    via: entry.via ?? null,
  });
}

@Injectable()
export class AuditService {
  constructor(
    private readonly db: Database,
    private readonly events: EventsService,
  ) {}

  /**
   * Written in the transaction of the decision it describes. With `id` (taken from the
   * table's sequence by the statement that decided) the row is not waited for.
   */
  async record(m: Transaction, at: number, entry: AuditEntry, id?: number): Promise<void> {
    const event = auditEvent(at, entry);
    if (id === undefined) event.id = (await insertRow(m, AuditEvent, event))!;
    else await insertRowLater(m, AuditEvent, Object.assign(event, { id }));
    this.events.auditEventRecorded(m, event);
  }

  /** Newest first; NOT_FOUND for an unknown environment; `after` is the id of the last event of the previous page. */
  list(environment: string, first: number, after: number | null): Promise<AuditEvent[]> {
    return this.db.read(async (m) => {
      if (!(await exists(m, Environment, { name: environment })))
        throw EnvironmentError.notFound(environment);
      const query = m
        .createQueryBuilder(AuditEvent, 'a')
        .where('a.environment = :environment', { environment })
        .orderBy('a.id', 'DESC')
        .limit(first);
      if (after != null) query.andWhere('a.id < :after', { after });
      return query.getMany();
    });
  }
}
