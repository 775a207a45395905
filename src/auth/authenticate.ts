import { createHash } from 'node:crypto';
import type { Counter } from 'prom-client';
import type { Principal } from '../model/principal.entity.js';
import { AuthError } from './auth.errors.js';
import type { AuthService } from './auth.service.js';
import { tokenCheckOf } from './principal-memory.js';
import type { RequestWithPrincipal } from './roles.decorator.js';

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
