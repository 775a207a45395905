import { Injectable, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthError } from '../auth/auth.errors.js';
import { UNSCOPED_KEY, ROLES_KEY } from '../auth/roles.decorator.js';
import { allowsEnvironment, environmentsOfOperation } from '../auth/scope.js';
import { Role } from '../common/role.js';
import type { Via } from '../common/via.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import type { Principal } from '../model/principal.entity.js';
import { QuotasService } from '../quotas/quotas.service.js';

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
    private readonly quotas: QuotasService,
    private readonly decisions: DecisionRunner,
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
    const refusal = new AuthError('FORBIDDEN', message);
    // At most one audit row per refused request, and a bounded number per principal; the
    // decision runner audits it as it does every rejected decision.
    if (this.quotas.mayAuditRefusal(request, principal.name)) {
      const decision = {
        environment: outside,
        actor: principal.name,
        action: actionOf(handler),
        via,
      };
      await this.decisions
        .refused(decision, refusal)
        .catch((error: unknown) =>
          this.logger.warn(`could not audit a refusal on ${outside}: ${(error as Error).message}`),
        );
    }
    throw refusal;
  }
}
