import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { Principal } from '../model/principal.entity.js';
import type { Role } from '../common/role.js';

export const ROLES_KEY = 'planfence:roles';

/** Roles allowed besides ADMIN, which may do everything. Without it, every authenticated role may. */
export const Roles = (...roles: Role[]) => SetMetadata(ROLES_KEY, roles);

export const UNSCOPED_KEY = 'planfence:unscoped';

/**
 * An operation not addressed by environment (tokens, principals, webhooks): a token limited
 * to environments (R26) may not call it, whatever its role, so that a scoped ADMIN cannot
 * mint, rotate or revoke tokens or read principals beyond its scope (FORBIDDEN).
 */
export const Unscoped = () => SetMetadata(UNSCOPED_KEY, true);

export const PUBLIC_KEY = 'planfence:public';

/** An operation that needs no bearer token (its argument is the credential, e.g. an OIDC JWT). */
export const Public = () => SetMetadata(PUBLIC_KEY, true);

export const TOKEN_CHECKED_KEY = 'planfence:token-checked';

/**
 * An operation whose decision checks the caller's token in its own transaction (its
 * Decision carries `token: tokenCheckOf(principal)`): on PostgreSQL the guard may take the
 * principal from memory instead of reading it first, a round trip less. Anything the
 * operation does before or besides that decision must not depend on the token being current.
 */
export const TokenCheckedInDecision = () => SetMetadata(TOKEN_CHECKED_KEY, true);

export interface RequestWithPrincipal {
  headers: Record<string, string | string[] | undefined>;
  principal?: Principal;
}

export function gqlRequest(context: ExecutionContext): RequestWithPrincipal {
  return GqlExecutionContext.create(context).getContext<{ req: RequestWithPrincipal }>().req;
}

/** The authenticated caller of this operation. */
export const CurrentPrincipal = createParamDecorator(
  (_: unknown, context: ExecutionContext): Principal => gqlRequest(context).principal!,
);
