import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { PgListenerModule } from '../database/pg-listener.module.js';
import { EventsService } from './events.service.js';
import { SubscriptionFeeds } from './feeds.js';
import { SocketGate } from './socket-gate.js';

/** The event bus (EventsService), the subscriptions' feeds and the gate of their sockets. */
@Module({
  imports: [AuthModule, PgListenerModule],
  providers: [EventsService, SubscriptionFeeds, SocketGate],
  exports: [EventsService, SubscriptionFeeds],
})
export class EventsModule {}
