import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { PersonResolver } from './person.resolver.js';
import { SessionsController } from './sessions.controller.js';
import { SessionsResolver } from './sessions.resolver.js';
import { SessionsService } from './sessions.service.js';

/** People sign in (DESIGN §19): the sign-in routes, sessions, and the person behind approvals. */
@Module({
  imports: [AuthModule],
  controllers: [SessionsController],
  providers: [SessionsService, SessionsResolver, PersonResolver],
})
export class SessionsModule {}
