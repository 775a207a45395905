import { createHash, timingSafeEqual } from 'node:crypto';
import {
  type CallHandler,
  Inject,
  type CanActivate,
  type ExecutionContext,
  Injectable,
  Logger,
  type NestInterceptor,
} from '@nestjs/common';
import { ModuleRef, Reflector } from '@nestjs/core';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { Counter } from 'prom-client';
import { map, type Observable } from 'rxjs';
import { AuditOutcome } from '../model/audit-event.entity.js';
import { AuditService } from '../audit/audit.service.js';
import type { Via } from '../common/via.js';
import { Clock } from '../common/clock.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database } from '../database/database.js';
import { exists } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { authentications } from '../limits/limit-metrics.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { QuotasService } from '../quotas/quotas.service.js';
import { AuthError } from './auth.errors.js';
import { AuthService } from './auth.service.js';
import type { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import {
  gqlRequest,
  PUBLIC_KEY,
  ROLES_KEY,
  type RequestWithPrincipal,
  TOKEN_CHECKED_KEY,
  UNSCOPED_KEY,
} from './roles.decorator.js';
import { tokenCheckOf } from './principal-memory.js';
import { allowsEnvironment, environmentsOfOperation } from './scope.js';

/** What one request's authentication gave: cached on the request, success or failure. */
interface AuthenticatedRequest extends RequestWithPrincipal {
  authentication?: Promise<Principal>;
  /** Whether `authentication` may answer a principal whose token a decision must still check. */
  mayBeUnchecked?: boolean;
}

/**
 * Authenticates a request once, however many fields it selects: the first call looks the
 * token up, later calls get the same principal or the same AuthError (so a document of
 * 50,000 fields without a token costs one failure, not 50,000). `unchecked`: the field's
 * decision checks the token itself (AuthService.authenticate); a later field that does not,
 * given a principal from memory, gets it read from the database (a second lookup, the only one).
 */
export function authenticateOnce(
  auth: AuthService,
  req: RequestWithPrincipal,
  lookups?: Counter<'outcome'>,
  unchecked = false,
): Promise<Principal> {
  const request = req as AuthenticatedRequest;
  if (request.principal && (unchecked || !tokenCheckOf(request.principal)))
    return Promise.resolve(request.principal);
  const lookUp = () => {
    const header = req.headers.authorization;
    // No bearer token: a GraphQL request may come with a console session's cookie (R41);
    // a session's bearer token (`planfence login`) is a session too, without the cookie's checks.
    const cookie = header ? null : sessionCookieOf(req);
    const bearer =
      typeof header === 'string'
        ? /^\s*Bearer (pfs_[A-Za-z0-9_-]{20,100})\s*$/i.exec(header)
        : null;
    const secret = cookie ?? bearer?.[1];
    if (secret)
      return auth
        .authenticateSession(secret)
        .then(({ principal, session }) => {
          lookups?.inc({ outcome: 'OK' });
          (req as CookieRequest).session = { ...session, secret, byCookie: Boolean(cookie) };
          return (request.principal = principal);
        })
        .catch((error: unknown) => {
          lookups?.inc({ outcome: error instanceof AuthError ? error.code : 'INTERNAL' });
          throw error;
        });
    return auth
      .authenticate(Array.isArray(header) ? header[0] : header, { unchecked })
      .then((principal) => {
        lookups?.inc({ outcome: 'OK' });
        return (request.principal = principal);
      })
      .catch((error: unknown) => {
        lookups?.inc({ outcome: error instanceof AuthError ? error.code : 'INTERNAL' });
        throw error;
      });
  };
  if (!request.authentication) {
    request.mayBeUnchecked = unchecked;
    request.authentication = lookUp();
  } else if (request.mayBeUnchecked && !unchecked) {
    request.mayBeUnchecked = false;
    request.authentication = request.authentication.then((principal) =>
      tokenCheckOf(principal) ? lookUp() : principal,
    );
  }
  // The failure is kept for the next field; nobody awaiting it yet is not an unhandled rejection.
  request.authentication.catch(() => undefined);
  return request.authentication;
}

/** A request a session authenticated: the session, its secret, and whether a cookie carried it. */
export interface CookieRequest extends RequestWithPrincipal {
  session?: { id: string; principal: string; kind: string; secret: string; byCookie: boolean };
}

/**
 * The console session's secret in the request's `planfence_session` cookie, on GraphQL
 * requests only (the one door a cookie opens: MCP and the rest take bearer tokens).
 */
export function sessionCookieOf(req: RequestWithPrincipal): string | null {
  const url = (req as { url?: string }).url;
  if (typeof url !== 'string' || !/^\/graphql(\?|$)/.test(url)) return null;
  const raw = req.headers.cookie;
  const text = Array.isArray(raw) ? raw.join('; ') : raw;
  if (!text) return null;
  for (const part of text.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === SESSION_COOKIE_NAME) {
      const value = part.slice(at + 1).trim();
      return /^pfs_[A-Za-z0-9_-]{20,100}$/.test(value) ? value : null;
    }
  }
  return null;
}

/** The cookie a console session travels in (src/sessions/session.entity.ts SESSION_COOKIE). */
const SESSION_COOKIE_NAME = 'planfence_session';

/** The CSRF token of a session secret (R42); the same derivation as src/sessions/sessions.service.ts. */
export function csrfTokenFor(secret: string): string {
  return createHash('sha256').update(`planfence-csrf:${secret}`).digest('base64url');
}

/** A resolver method, whose metadata says who may call it. */
export type Handler = (...args: never[]) => unknown;

/** `startDeployment` → `START_DEPLOYMENT` (an audit action, at most 32 characters). */
function actionOf(handler: string): string {
  return handler
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()
    .slice(0, 32);
}

/**
 * The checks every door applies to an operation, with its resolver's metadata as the one
 * statement of who may call it: `@Roles` (ADMIN may always; none: every role; `@Roles()`:
 * ADMIN only) and the environments a limited token may act on (R26), read from the
 * operation's arguments (scope.ts). Outside them → FORBIDDEN, recorded in the environment's
 * audit log when the environment exists (R27). GraphQL reaches them through the AuthGuard,
 * MCP tools through src/mcp/ with the GraphQL operation each tool stands for.
 *
 * `request` is the one object a request's charges are kept on (its GraphQL context, or a
 * tool call's own): a refused call counts against its principal's request rate like an
 * accepted one, once per request, and its audit rows are bounded (QuotasService).
 */
@Injectable()
export class Access {
  private readonly logger = new Logger(Access.name);

  constructor(
    private readonly reflector: Reflector,
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly modules: ModuleRef,
  ) {}

  /** The roles besides ADMIN that may call a resolver method; undefined: every role. */
  rolesOf(handler: Handler): Role[] | undefined {
    return this.reflector.get<Role[] | undefined>(ROLES_KEY, handler);
  }

  /** Whether `role` may call the resolver method `handler`. */
  mayCall(role: Role, handler: Handler): boolean {
    const allowed = this.rolesOf(handler);
    return !allowed || role === Role.ADMIN || allowed.includes(role);
  }

  /** Whether the checks below let `principal` call `handler` with `args`: none of them would refuse. */
  allows(principal: Principal, handler: Handler, args: Record<string, unknown>): boolean {
    if (!this.mayCall(principal.role, handler)) return false;
    if (!Array.isArray(principal.environments)) return true;
    if (this.reflector.get<boolean | undefined>(UNSCOPED_KEY, handler)) return false;
    return environmentsOfOperation(handler.name, args).every((environment) =>
      allowsEnvironment(principal.environments, environment),
    );
  }

  checkRole(principal: Principal, handler: Handler, request: object): void {
    if (!this.mayCall(principal.role, handler)) {
      this.quotas.chargeRefusal(request, principal.name);
      throw new AuthError('FORBIDDEN', `role ${principal.role} may not call ${handler.name}`);
    }
  }

  /** Token, principal and webhook operations are not addressed by environment: a limited token may not call them. */
  checkUnscoped(principal: Principal, handler: Handler, request: object): void {
    if (!Array.isArray(principal.environments)) return;
    if (!this.reflector.get<boolean | undefined>(UNSCOPED_KEY, handler)) return;
    this.quotas.chargeRefusal(request, principal.name);
    throw new AuthError(
      'FORBIDDEN',
      `a token limited to environments may not call ${handler.name}: tokens, principals and webhooks are not addressed by environment; use an unlimited ADMIN token`,
    );
  }

  /** FORBIDDEN (audited) when the operation `handler` with `args` names an environment outside the token's. */
  async checkScope(
    principal: Principal,
    handler: string,
    args: Record<string, unknown>,
    via: Via,
    request: object,
  ): Promise<void> {
    if (!Array.isArray(principal.environments)) return;
    const outside = environmentsOfOperation(handler, args).find(
      (environment) => !allowsEnvironment(principal.environments, environment),
    );
    if (outside === undefined) return;
    this.quotas.chargeRefusal(request, principal.name);
    const message = `this token may act only on environments matching ${principal.environments.join(', ')}; not on "${outside}"`;
    // At most one audit row per refused request, and a bounded number per principal.
    if (this.quotas.mayAuditRefusal(request, principal.name)) {
      await this.audit(principal, handler, outside, message, via).catch((error: unknown) =>
        this.logger.warn(`could not audit a refusal on ${outside}: ${(error as Error).message}`),
      );
    }
    throw new AuthError('FORBIDDEN', message);
  }

  private get quotas(): QuotasService {
    return this.modules.get(QuotasService, { strict: false });
  }

  private async audit(
    principal: Principal,
    handler: string,
    environment: string,
    detail: string,
    via: Via,
  ): Promise<void> {
    const audit = this.modules.get(AuditService, { strict: false });
    await this.db.write(async (m) => {
      if (!(await exists(m, Environment, { name: environment }))) return;
      await audit.record(m, await this.clock.now(m), {
        environment,
        actor: principal.name,
        action: actionOf(handler),
        outcome: AuditOutcome.REJECTED,
        code: 'FORBIDDEN',
        detail,
        via,
      });
    });
  }
}

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

/** List queries whose items belong to environments: a limited token sees only its environments' items. */
const SCOPED_LISTS = new Set(['environments', 'reviewQueue']);

/** Filters the answers of the list queries (`environments`, `reviewQueue`) to the caller's environments (R26). */
@Injectable()
export class EnvironmentScopeInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType<string>() !== 'graphql' || !SCOPED_LISTS.has(context.getHandler().name)) {
      return next.handle();
    }
    const patterns = gqlRequest(context).principal?.environments;
    if (!Array.isArray(patterns)) return next.handle();
    return next
      .handle()
      .pipe(
        map((items: unknown) =>
          Array.isArray(items)
            ? items.filter((item: { environment?: string; name?: string }) =>
                allowsEnvironment(patterns, item.environment ?? item.name ?? ''),
              )
            : items,
        ),
      );
  }
}
