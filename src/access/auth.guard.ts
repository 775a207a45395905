import { timingSafeEqual } from 'node:crypto';
import { Inject, type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { Counter } from 'prom-client';
import { AuthError } from '../auth/auth.errors.js';
import { AuthService } from '../auth/auth.service.js';
import { authenticateOnce, type CookieRequest, csrfTokenFor } from '../auth/authenticate.js';
import { tokenCheckOf } from '../auth/principal-memory.js';
import {
  gqlRequest,
  PUBLIC_KEY,
  type RequestWithPrincipal,
  TOKEN_CHECKED_KEY,
} from '../auth/roles.decorator.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { authentications } from '../limits/limit-metrics.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { Access, type Handler } from './access.js';

/**
 * Every GraphQL operation needs a bearer token unless `@Public`; then the Access checks
 * (role, environments) for every query, mutation and subscription.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly reflector: Reflector,
    private readonly access: Access,
    metrics: MetricsService,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.lookups = authentications(metrics.registry);
  }

  private readonly lookups: Counter<'outcome'>;

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType<string>() !== 'graphql') return true;
    const handler = context.getHandler() as Handler;
    if (this.reflector.get<boolean | undefined>(PUBLIC_KEY, handler)) return true;
    const gql = GqlExecutionContext.create(context);
    const args = gql.getArgs<Record<string, unknown>>();
    const req = gqlRequest(context);
    const checkedInDecision = this.reflector.get<boolean | undefined>(TOKEN_CHECKED_KEY, handler);
    let principal = await authenticateOnce(this.auth, req, this.lookups, checkedInDecision);
    if (gql.getInfo<{ operation: { operation: string } }>().operation.operation === 'mutation')
      this.checkCsrf(req);
    // A refusal is answered (and audited) for the principal as the database has it now.
    if (tokenCheckOf(principal) && !this.access.allows(principal, handler, args))
      principal = await authenticateOnce(this.auth, req, this.lookups);
    const request = gql.getContext<object>();
    this.access.checkRole(principal, handler, request);
    this.access.checkUnscoped(principal, handler, request);
    await this.access.checkScope(principal, handler.name, args, 'graphql', request);
    return true;
  }

  /**
   * R42: a change a session cookie authenticates carries the session's CSRF token in
   * x-planfence-csrf and an Origin of the service; else FORBIDDEN before any field runs
   * (mutations run one after another: the first field's refusal stops the document).
   */
  private checkCsrf(req: RequestWithPrincipal): void {
    const session = (req as CookieRequest).session;
    if (!session?.byCookie) return;
    const given = req.headers['x-planfence-csrf'];
    const expected = Buffer.from(csrfTokenFor(session.secret));
    const header = Buffer.from(typeof given === 'string' ? given : '');
    if (header.length !== expected.length || !timingSafeEqual(header, expected))
      throw new AuthError(
        'FORBIDDEN',
        "a change made with a session cookie needs header x-planfence-csrf: the session's csrfToken (mySession)",
      );
    const origin = req.headers.origin;
    // A browser that sends no Origin on a same-origin request (Chromium, under the service's
    // Referrer-Policy: no-referrer) says where the request comes from in Sec-Fetch-Site, a
    // header no page script can set.
    const sameOrigin = origin === undefined && req.headers['sec-fetch-site'] === 'same-origin';
    if (!sameOrigin && (typeof origin !== 'string' || !this.serviceOrigins(req).includes(origin)))
      throw new AuthError(
        'FORBIDDEN',
        `a change made with a session cookie must come from the service's own pages (Origin ${typeof origin === 'string' ? `"${origin}"` : 'missing'})`,
      );
  }

  /** The service's origins: PLANFENCE_PUBLIC_URL's, and the one this request addressed. */
  private serviceOrigins(req: RequestWithPrincipal): string[] {
    const origins: string[] = [];
    if (this.config.mcp.publicUrl) origins.push(new URL(this.config.mcp.publicUrl).origin);
    const host = req.headers.host;
    const protocol = (req as { protocol?: string }).protocol ?? 'http';
    if (typeof host === 'string') origins.push(`${protocol}://${host}`);
    return origins;
  }
}
