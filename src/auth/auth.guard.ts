import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Counter } from 'prom-client';
import { authentications } from '../limits/limit-metrics.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { AuthError } from './auth.errors.js';
import { AuthService } from './auth.service.js';
import { type Principal, Role } from './principal.entity.js';
import { gqlRequest, ROLES_KEY, type RequestWithPrincipal } from './roles.decorator.js';

/** What one request's authentication gave: cached on the request, success or failure. */
interface AuthenticatedRequest extends RequestWithPrincipal {
  authentication?: Promise<Principal>;
}

/**
 * Authenticates a request once, however many fields it selects: the first call looks the
 * token up, later calls get the same principal or the same AuthError (so a document of
 * 50,000 fields without a token costs one failure, not 50,000).
 */
export function authenticateOnce(
  auth: AuthService,
  req: RequestWithPrincipal,
  lookups?: Counter<'outcome'>,
): Promise<Principal> {
  const request = req as AuthenticatedRequest;
  if (request.principal) return Promise.resolve(request.principal);
  if (!request.authentication) {
    const header = req.headers.authorization;
    request.authentication = auth
      .authenticate(Array.isArray(header) ? header[0] : header)
      .then((principal) => {
        lookups?.inc({ outcome: 'OK' });
        return (request.principal = principal);
      })
      .catch((error: unknown) => {
        lookups?.inc({ outcome: error instanceof AuthError ? error.code : 'INTERNAL' });
        throw error;
      });
    // The failure is kept for the next field; nobody awaiting it yet is not an unhandled rejection.
    request.authentication.catch(() => undefined);
  }
  return request.authentication;
}

/** Every GraphQL operation needs a bearer token; `@Roles` narrows who may call it (DESIGN §5). */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly reflector: Reflector,
    metrics: MetricsService,
  ) {
    this.lookups = authentications(metrics.registry);
  }

  private readonly lookups: Counter<'outcome'>;

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType<string>() !== 'graphql') return true;
    const principal = await authenticateOnce(this.auth, gqlRequest(context), this.lookups);
    const allowed = this.reflector.get<Role[] | undefined>(ROLES_KEY, context.getHandler());
    const role = principal.role;
    if (!allowed || role === Role.ADMIN || allowed.includes(role)) return true;
    throw new AuthError('FORBIDDEN', `role ${role} may not call ${context.getHandler().name}`);
  }
}
