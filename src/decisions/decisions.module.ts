import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { EventsModule } from '../events/events.module.js';
import { IdempotencyModule } from '../idempotency/idempotency.module.js';
import { OutboxModule } from '../outbox/outbox.module.js';
import { DecisionRunner } from './decision.runner.js';

/** The decision runner: the one sender of what the guard decided (DecisionTx.effects, src/fencing/effects.ts). */
@Module({
  imports: [AuditModule, EventsModule, IdempotencyModule, OutboxModule],
  providers: [DecisionRunner],
  exports: [DecisionRunner],
})
export class DecisionsModule {}
