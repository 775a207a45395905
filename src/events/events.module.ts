import { Global, Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { EventsService } from './events.service.js';
import { SubscriptionFeeds } from './feeds.js';
import { PgListener } from './pg-listener.js';
import { PrincipalChanges } from './principal-changes.js';
import { SocketGate } from './socket-gate.js';

@Global()
@Module({
  imports: [AuthModule],
  providers: [PgListener, EventsService, SubscriptionFeeds, PrincipalChanges, SocketGate],
  exports: [PgListener, EventsService, SubscriptionFeeds, PrincipalChanges],
})
export class EventsModule {}
