import { Module } from '@nestjs/common';
import { PgListenerModule } from '../database/pg-listener.module.js';
import { AuthResolver } from './auth.resolver.js';
import { AuthService } from './auth.service.js';
import { PrincipalChanges } from './principal-changes.js';

/** Principals and their tokens; the checks of a request (the AuthGuard) are src/access/'s. */
@Module({
  imports: [PgListenerModule],
  providers: [AuthService, PrincipalChanges, AuthResolver],
  exports: [AuthService, PrincipalChanges],
})
export class AuthModule {}
