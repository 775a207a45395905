import { Body, Controller, Get, Inject, Logger, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import * as oidc from 'openid-client';
import { AuthError } from '../auth/auth.errors.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import type { OidcLogin } from '../config/oidc-config.js';
import { SESSION_COOKIE } from './session.entity.js';
import { SignInFailed, SignInRefused } from './sessions.errors.js';
import { type IdClaims, SessionsService } from './sessions.service.js';

/** The cookie that carries a sign-in in progress (PKCE verifier, state, nonce) to the callback. */
const LOGIN_COOKIE = 'planfence_login';
const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]', '::1'];

/** What /auth/login keeps for /auth/callback. */
interface Pending {
  /** Index of the login in the configuration. */
  l: number;
  /** PKCE verifier, state, nonce. */
  v: string;
  s: string;
  n: string;
  /** Where the console goes afterwards (a path of the service). */
  r: string;
  /** `planfence login`: its loopback redirect, state and PKCE challenge. */
  c?: { redirect: string; state: string; challenge: string };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, message: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/dashboard.css"></head><body><main class="sign-in-page"><h1>${escapeHtml(title)}</h1>
<p id="sign-in-message">${escapeHtml(message)}</p><p><a href="/">Back to the console</a></p></main></body></html>`;
}

function cookie(
  name: string,
  value: string,
  options: { maxAge: number; path: string; secure: boolean },
) {
  return `${name}=${value}; Path=${options.path}; Max-Age=${options.maxAge}; HttpOnly; SameSite=Lax${options.secure ? '; Secure' : ''}`;
}

/** Where `planfence login` asked the code to be sent, when every part is as it must be. */
function cliTarget(given: {
  redirect?: unknown;
  state?: unknown;
  challenge?: unknown;
}): Pending['c'] {
  const redirect = loopbackRedirect(given.redirect);
  const { state, challenge } = given;
  if (
    !redirect ||
    typeof state !== 'string' ||
    typeof challenge !== 'string' ||
    !/^[A-Za-z0-9_-]{16,128}$/.test(state) ||
    !/^[A-Za-z0-9_-]{43}$/.test(challenge)
  )
    return undefined;
  return { redirect, state, challenge };
}

/** A path of this service to return to after the sign-in (never another origin). */
function returnPath(value: unknown): string | null {
  return typeof value === 'string' && /^\/(?!\/)[^\\\s]{0,500}$/.test(value) ? value : null;
}

/** A `planfence login` redirect: http on a loopback address only (RFC 8252 §7.3). */
function loopbackRedirect(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 200) return null;
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' || !['127.0.0.1', '[::1]'].includes(url.hostname)) return null;
    if (url.username || url.password || url.hash) return null;
    return url.href;
  } catch {
    return null;
  }
}

/**
 * People sign in (DESIGN §19, R40): `GET /auth/login` sends the browser to the provider
 * with the authorization code flow, PKCE (S256), state and nonce (openid-client); `GET
 * /auth/callback` takes the code, verifies the ID token (signature, iss, aud = the client
 * id, exp, nonce) and opens a session (SessionsService) whose secret goes into an HttpOnly,
 * SameSite=Lax cookie (Secure unless the service is served on loopback). `planfence login`
 * runs the same flow with `cli_redirect` (a loopback address): the callback hands its
 * one-time code to that address, and `POST /auth/cli-token` exchanges it for the session's
 * bearer token. `GET /auth/logins` tells the console which providers to offer.
 */
@Controller('auth')
export class SessionsController {
  private readonly logger = new Logger(SessionsController.name);
  private readonly discovered = new Map<number, Promise<oidc.Configuration>>();

  constructor(
    private readonly sessions: SessionsService,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /** The providers the console offers (empty: sign-in is off; tokens only). */
  @Get('logins')
  logins(): { logins: { label: string; url: string }[] } {
    return {
      logins: this.sessions.logins().map((login, index) => ({
        label: login.label,
        url: `/auth/login?login=${index}`,
      })),
    };
  }

  @Get('login')
  async login(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const query = req.query as Record<string, string | undefined>;
    const logins = this.sessions.logins();
    const index = query.login === undefined ? 0 : Number(query.login);
    const login = logins[index];
    if (!login) {
      await this.answer(
        reply,
        404,
        'Sign-in is not configured',
        'This service has no such sign-in provider (PLANFENCE_OIDC_CONFIG logins).',
      );
      return;
    }
    const base = this.base(req);
    if (!base) {
      await this.answer(
        reply,
        400,
        'Sign-in needs the service address',
        'Set PLANFENCE_PUBLIC_URL to the address people use to reach this service (docs/identity.md).',
      );
      return;
    }
    let cli: Pending['c'];
    if (query.cli_redirect !== undefined) {
      cli = cliTarget({
        redirect: query.cli_redirect,
        state: query.cli_state,
        challenge: query.cli_challenge,
      });
      if (!cli) {
        await this.answer(
          reply,
          400,
          'Sign-in refused',
          'cli_redirect must be http://127.0.0.1:PORT/... (with cli_state and an S256 cli_challenge).',
        );
        return;
      }
    }
    let configuration: oidc.Configuration;
    try {
      configuration = await this.configuration(index, login);
    } catch (error) {
      this.logger.warn(`sign-in provider ${login.issuer} unreachable: ${(error as Error).message}`);
      await this.answer(
        reply,
        502,
        'Sign-in provider unreachable',
        `The provider ${login.issuer} did not answer its discovery document; try again later.`,
      );
      return;
    }
    const returnTo = returnPath(query.return) ?? '/';
    const pending: Pending = {
      l: index,
      v: oidc.randomPKCECodeVerifier(),
      s: oidc.randomState(),
      n: oidc.randomNonce(),
      r: returnTo,
      ...(cli ? { c: cli } : {}),
    };
    const url = oidc.buildAuthorizationUrl(configuration, {
      redirect_uri: `${base}/auth/callback`,
      scope: login.scopes.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(pending.v),
      code_challenge_method: 'S256',
      state: pending.s,
      nonce: pending.n,
    });
    await reply
      .code(302)
      .header('cache-control', 'no-store')
      .header(
        'set-cookie',
        cookie(LOGIN_COOKIE, Buffer.from(JSON.stringify(pending)).toString('base64url'), {
          maxAge: 600,
          path: '/auth',
          secure: this.secure(base),
        }),
      )
      .header('location', url.href)
      .send();
  }

  @Get('callback')
  async callback(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const base = this.base(req);
    const pending = this.pendingOf(req);
    const clear = cookie(LOGIN_COOKIE, '', {
      maxAge: 0,
      path: '/auth',
      secure: base ? this.secure(base) : true,
    });
    const login = pending ? this.sessions.logins()[pending.l] : undefined;
    if (!base || !pending || !login) {
      await this.answer(
        reply,
        400,
        'Sign-in failed',
        'This sign-in was not started here, or took too long: start again.',
        clear,
      );
      return;
    }
    let claims: IdClaims;
    try {
      const configuration = await this.configuration(pending.l, login);
      const current = new URL(`${base}/auth/callback`);
      current.search = new URL(req.url, base).search;
      const tokens = await oidc.authorizationCodeGrant(configuration, current, {
        pkceCodeVerifier: pending.v,
        expectedState: pending.s,
        expectedNonce: pending.n,
        idTokenExpected: true,
      });
      const idClaims = tokens.claims();
      if (!idClaims) throw new SignInFailed('the provider sent no ID token');
      claims = idClaims;
    } catch (error) {
      this.logger.warn(`sign-in with ${login.issuer} failed: ${(error as Error).message}`);
      await this.answer(
        reply,
        400,
        'Sign-in failed',
        `The sign-in could not be completed (${(error as Error).message}); start again.`,
        clear,
      );
      return;
    }
    try {
      const signed = await this.sessions.signIn(
        login,
        claims,
        pending.c ? 'cli' : 'console',
        pending.c?.challenge ?? null,
      );
      if (pending.c) {
        const target = new URL(pending.c.redirect);
        target.searchParams.set('code', signed.code!);
        target.searchParams.set('state', pending.c.state);
        await reply
          .code(302)
          .header('cache-control', 'no-store')
          .header('set-cookie', clear)
          .header('location', target.href)
          .send();
        return;
      }
      await reply
        .code(302)
        .header('cache-control', 'no-store')
        .header('set-cookie', [
          clear,
          cookie(SESSION_COOKIE, signed.secret!, {
            maxAge: login.sessionHours * 3600,
            path: '/',
            secure: this.secure(base),
          }),
        ])
        .header('location', pending.r)
        .send();
    } catch (error) {
      if (error instanceof SignInRefused) {
        await this.answer(reply, 403, 'Sign-in refused', error.message, clear);
        return;
      }
      throw error;
    }
  }

  /** `planfence login`: the one-time code and the PKCE verifier for the session's bearer token. */
  @Post('cli-token')
  async cliToken(@Body() body: unknown, @Res() reply: FastifyReply): Promise<void> {
    const { code, verifier } = (body ?? {}) as { code?: unknown; verifier?: unknown };
    try {
      if (
        typeof code !== 'string' ||
        typeof verifier !== 'string' ||
        code.length > 200 ||
        verifier.length > 200
      )
        throw new AuthError('UNAUTHENTICATED', 'expected {"code": ..., "verifier": ...}');
      const { secret, session } = await this.sessions.exchangeCode(code, verifier);
      await reply
        .code(200)
        .header('cache-control', 'no-store')
        .send({
          token: secret,
          principal: session.principal,
          expiresAt: new Date(session.expiresAt).toISOString(),
        });
    } catch (error) {
      if (!(error instanceof AuthError)) throw error;
      await reply
        .code(401)
        .header('cache-control', 'no-store')
        .send({ code: error.code, message: error.message });
    }
  }

  private async answer(
    reply: FastifyReply,
    status: number,
    title: string,
    message: string,
    setCookie?: string,
  ) {
    if (setCookie) reply.header('set-cookie', setCookie);
    await reply
      .code(status)
      .header('cache-control', 'no-store')
      .type('text/html; charset=utf-8')
      .send(page(title, message));
  }

  private pendingOf(req: FastifyRequest): Pending | null {
    const raw = req.headers.cookie ?? '';
    for (const part of raw.split(';')) {
      const at = part.indexOf('=');
      if (at > 0 && part.slice(0, at).trim() === LOGIN_COOKIE) {
        try {
          const value = JSON.parse(
            Buffer.from(part.slice(at + 1).trim(), 'base64url').toString('utf8'),
          ) as Pending;
          // The cookie is the browser's to change: where the callback sends it is checked
          // again as /auth/login checked it (a loopback address, a path of this service).
          if (
            typeof value.v === 'string' &&
            typeof value.s === 'string' &&
            typeof value.n === 'string' &&
            typeof value.l === 'number' &&
            returnPath(value.r) !== null &&
            (value.c === undefined ||
              (typeof value.c === 'object' && value.c !== null && cliTarget(value.c) !== undefined))
          )
            return value;
          return null;
        } catch {
          return null;
        }
      }
    }
    return null;
  }

  /**
   * The service's address as people reach it: PLANFENCE_PUBLIC_URL, else the request's own
   * when it is a loopback address (a development service); null otherwise.
   */
  private base(req: FastifyRequest): string | null {
    if (this.config.mcp.publicUrl) return this.config.mcp.publicUrl;
    const host = req.headers.host ?? '';
    const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0];
    return LOOPBACK_HOSTS.includes(name) ? `${req.protocol}://${host}` : null;
  }

  /** Cookies are Secure unless the service is served on loopback (R41). */
  private secure(base: string): boolean {
    const url = new URL(base);
    return url.protocol === 'https:' || !LOOPBACK_HOSTS.includes(url.hostname);
  }

  /** The provider's discovery document, read once (again after a failure). */
  private configuration(index: number, login: OidcLogin): Promise<oidc.Configuration> {
    let found = this.discovered.get(index);
    if (!found) {
      const issuer = new URL(login.issuer);
      const insecure = issuer.protocol === 'http:';
      found = oidc.discovery(
        issuer,
        login.clientId,
        undefined,
        login.clientSecret ? oidc.ClientSecretBasic(login.clientSecret) : oidc.None(),
        { timeout: 10, ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}) },
      );
      found.catch(() => this.discovered.delete(index));
      this.discovered.set(index, found);
    }
    return found;
  }
}
