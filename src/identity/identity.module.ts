import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { IdentityResolver } from './identity.resolver.js';
import { OidcService } from './oidc.service.js';

/** OIDC token exchange for CI agents (docs/design.md §12, docs/identity.md). */
@Module({ imports: [AuthModule], providers: [OidcService, IdentityResolver] })
export class IdentityModule {}
