import { Module } from '@nestjs/common';
import { APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { Access, AuthGuard, EnvironmentScopeInterceptor } from './auth.guard.js';
import { AuthResolver } from './auth.resolver.js';
import { AuthService } from './auth.service.js';

@Module({
  providers: [
    AuthService,
    Access,
    AuthResolver,
    { provide: APP_GUARD, useClass: AuthGuard },
    { provide: APP_INTERCEPTOR, useClass: EnvironmentScopeInterceptor },
  ],
  exports: [AuthService, Access],
})
export class AuthModule {}
