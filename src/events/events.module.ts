import { Global, Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { EventsService } from './events.service.js';
import { PrincipalChanges } from './principal-changes.js';
import { SocketGate } from './socket-gate.js';

@Global()
@Module({
  imports: [AuthModule],
  providers: [EventsService, PrincipalChanges, SocketGate],
  exports: [EventsService, PrincipalChanges],
})
export class EventsModule {}
