import { Inject, Injectable, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Server } from 'node:http';
import {
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  errors as joseErrors,
  type JWTPayload,
  jwtVerify,
} from 'jose';
import { AuthError } from '../auth/auth.errors.js';
import { AuthService } from '../auth/auth.service.js';
import { PRINCIPAL_NAME_PATTERN } from '../auth/dto/token.args.js';
import { type IssuedToken, Principal } from '../model/principal.entity.js';
import { matchesPattern } from '../auth/scope.js';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { findOne } from '../database/rows.js';
import { PrincipalChanges } from '../auth/principal-changes.js';
import { QuotaError } from '../quotas/quota.errors.js';
import { TokenBuckets } from '../quotas/token-buckets.js';
import { fetchBounded } from './bounded-fetch.js';
import type { OidcIssuer, OidcRule } from '../config/oidc-config.js';

/** The largest discovery document and JWKS read from an issuer. */
const MAX_DISCOVERY_BYTES = 64 * 1024;
const MAX_JWKS_BYTES = 256 * 1024;

type KeySet = ReturnType<typeof createRemoteJWKSet>;

/** What the exchange record says of one attempt (table oidc_exchanges). */
interface ExchangeRecord {
  issuer: string;
  subject: string | null;
  principal: string | null;
  ruleIndex: number | null;
  outcome: 'ACCEPTED' | 'REJECTED';
  code: string | null;
  detail: string | null;
}

/** A claim's value as rules see it: strings and numbers as text; anything else does not match. */
function claimText(payload: JWTPayload, claim: string): string | null {
  const value = payload[claim];
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}

/** The claims of `rule` that `payload` fails, in the rule's order (empty: it matches). */
function failedClaims(rule: OidcRule, payload: JWTPayload): string[] {
  return Object.entries(rule.claims)
    .filter(([claim, expected]) => {
      const actual = claimText(payload, claim);
      if (actual === null) return true;
      return expected.includes('*') ? !matchesPattern(actual, expected) : actual !== expected;
    })
    .map(([claim]) => claim);
}

/** The rule's name template with each `{claim}` replaced; null when a claim is missing. */
function principalName(
  template: string,
  payload: JWTPayload,
): { name: string } | { missing: string } {
  let missing: string | null = null;
  const name = template.replace(/\{([^{}]+)\}/g, (_, claim: string) => {
    const value = claimText(payload, claim);
    if (value === null) missing ??= claim;
    return value ?? '';
  });
  return missing ? { missing } : { name };
}

/** The first rule of `issuer` whose claims `payload` matches, or each rule's failed claims. */
function mapToRule(
  issuer: OidcIssuer,
  payload: JWTPayload,
): { mapped: { rule: OidcRule; index: number; name: string } | null; failures: string[] } {
  const failures: string[] = [];
  for (const [index, rule] of issuer.rules.entries()) {
    const failed = failedClaims(rule, payload);
    const made = principalName(rule.principal, payload);
    if ('missing' in made) failed.push(made.missing);
    if (failed.length) {
      failures.push(`rule ${index}: ${failed.join(', ')}`);
      continue;
    }
    return { mapped: { rule, index, name: (made as { name: string }).name }, failures };
  }
  return { mapped: null, failures };
}

/** JWT `typ` headers an access token may carry (RFC 9068 `at+jwt`; none; or plain JWT). */
const ACCESS_TOKEN_TYPES = ['at+jwt', 'application/at+jwt', 'jwt'];

/** What an access token (R44) authenticates as: its principal's name, until the token's end. */
interface AccessGrant {
  name: string;
  /** performance.now() past which the token is verified again. */
  until: number;
}

/**
 * R25: exchanges an OIDC JWT from a configured issuer for a short-lived planfence token.
 *
 * The JWT's `iss` picks the configured issuer; its signature is checked against the
 * issuer's JWKS (fetched from `jwksUri` or the discovery document, cached, fetched again on
 * an unknown `kid` at most once per cooldown, every fetch with a timeout) with the issuer's
 * asymmetric algorithms only; `aud` must be exactly the configured audience (an array of
 * more than one is refused); `exp`/`nbf` are judged by the service clock with a small
 * leeway; the required claims must be present. Any of these failing is UNAUTHENTICATED.
 * The first rule whose claims all match maps the token; none → FORBIDDEN naming the claims
 * each rule failed. A `jti` is exchanged once: its row (kept until the JWT's `exp`) is
 * inserted in the exchange's transaction, and the insert's row count decides. Every
 * attempt that names a configured issuer is recorded in `oidc_exchanges` and logged.
 */
@Injectable()
export class OidcService {
  private readonly logger = new Logger(OidcService.name);
  private readonly keySets = new Map<string, Promise<KeySet>>();
  /** R44: access tokens verified, by their SHA-256, and the verifications under way. */
  private readonly accessGrants = new Map<string, AccessGrant>();
  private readonly verifying = new Map<string, Promise<AccessGrant>>();
  /**
   * R44: the principals access tokens authenticate, by name, as last read; forgotten when
   * the principal changes on any instance (revoked, regrouped, renewed), then read again.
   */
  private readonly accessPrincipals = new Map<string, Principal>();
  /** Changes seen (a read that overlapped one is not kept). */
  private principalChanges = 0;
  /** Failed discovery and JWKS fetches by URL, answered from here until `until` (performance.now()). */
  private readonly failedFetches = new Map<string, { error: Error; until: number }>();
  private readonly bySource: TokenBuckets;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly auth: AuthService,
    @Inject(CONFIG) private readonly config: Config,
    private readonly adapterHost: HttpAdapterHost,
    changes: PrincipalChanges,
  ) {
    changes.onChange((name) => {
      this.principalChanges++;
      this.accessPrincipals.delete(name);
    });
    if (config.identity.oidc?.issuers.some((issuer) => issuer.accessTokens))
      auth.useAccessTokens((token) => this.authenticateAccessToken(token));
    const perMinute = config.identity.exchangesPerMinute;
    this.bySource = new TokenBuckets(
      `at most ${perMinute} OIDC exchanges per minute per source address (PLANFENCE_OIDC_EXCHANGES_PER_MINUTE)`,
      perMinute,
      perMinute / 60,
    );
  }

  /**
   * `source` (the caller's address) is charged first: beyond its exchanges per minute the
   * call is RATE_LIMITED and nothing is verified, recorded or logged.
   */
  async exchange(token: string, source = ''): Promise<IssuedToken> {
    const at = performance.now();
    const wait = this.bySource.wait(source, 1, at);
    if (wait > 0) throw QuotaError.rateLimited(this.bySource.limit, Math.max(1, Math.ceil(wait)));
    this.bySource.take(source, 1, at);
    if (this.bySource.size > 10_000) this.bySource.prune(at);
    const issuers = this.config.identity.oidc?.issuers ?? [];
    if (!issuers.length) {
      throw new AuthError(
        'UNAUTHENTICATED',
        'no OIDC issuer is configured (PLANFENCE_OIDC_CONFIG)',
      );
    }
    let unverified: JWTPayload;
    try {
      unverified = decodeJwt(token);
    } catch {
      throw new AuthError('UNAUTHENTICATED', 'the OIDC token is not a JWT');
    }
    const issuer = issuers.find((candidate) => candidate.issuer === unverified.iss);
    if (!issuer) {
      throw new AuthError('UNAUTHENTICATED', 'the OIDC token is not from a configured issuer');
    }
    const subject = typeof unverified.sub === 'string' ? unverified.sub.slice(0, 255) : null;
    const refuse = async (
      code: 'UNAUTHENTICATED' | 'FORBIDDEN',
      message: string,
      extra: Partial<ExchangeRecord> = {},
    ) => {
      await this.record({
        issuer: issuer.issuer,
        subject,
        principal: null,
        ruleIndex: null,
        outcome: 'REJECTED',
        code,
        detail: message,
        ...extra,
      });
      return new AuthError(code, message);
    };

    const now = await this.clock.now();
    let payload: JWTPayload;
    try {
      payload = await this.verify(token, issuer, now);
    } catch (error) {
      throw await refuse('UNAUTHENTICATED', `the OIDC token was refused: ${describe(error)}`);
    }

    const { mapped, failures } = mapToRule(issuer, payload);
    if (!mapped) {
      throw await refuse(
        'FORBIDDEN',
        `no rule of issuer ${issuer.issuer} matches this token; claims that failed: ${failures.join('; ')}`,
      );
    }
    const { rule, index, name } = mapped;
    if (!PRINCIPAL_NAME_PATTERN.test(name)) {
      throw await refuse(
        'FORBIDDEN',
        `rule ${index} makes the principal name "${name.slice(0, 80)}", which is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$)`,
        { ruleIndex: index },
      );
    }
    const exp = (payload.exp as number) * 1000;
    const expiresAt = Math.min(exp, now + this.config.identity.maxTokenSeconds * 1000);
    if (expiresAt <= now) {
      throw await refuse('UNAUTHENTICATED', 'the OIDC token has expired', { ruleIndex: index });
    }
    const jti: unknown = payload.jti;
    if (jti !== undefined && (typeof jti !== 'string' || jti.length > 255)) {
      throw await refuse(
        'UNAUTHENTICATED',
        'the OIDC token was refused: its jti must be a string of at most 255 characters',
      );
    }
    let issued: IssuedToken;
    try {
      issued = await this.db.write(async (m) => {
        if (jti !== undefined) {
          const tolerance = this.config.identity.clockToleranceSeconds * 1000;
          await execute(m, 'DELETE FROM oidc_used_tokens WHERE expires_at < :before', {
            before: now - tolerance,
          });
          const fresh = await execute(
            m,
            `INSERT INTO oidc_used_tokens (issuer, jti, expires_at) VALUES (:issuer, :jti, :expiresAt)
             ON CONFLICT DO NOTHING`,
            { issuer: issuer.issuer, jti, expiresAt: exp + tolerance },
          );
          if (!fresh) {
            throw new AuthError(
              'UNAUTHENTICATED',
              'this OIDC token (its jti) was already exchanged',
            );
          }
        }
        return this.grant(m, now, { issuer, subject, mapped, expiresAt, detail: null });
      });
    } catch (error) {
      if (error instanceof AuthError) {
        throw await refuse(error.code as 'UNAUTHENTICATED' | 'FORBIDDEN', error.message, {
          principal: name,
          ruleIndex: index,
        });
      }
      throw error;
    }
    this.logger.log(
      `OIDC exchange: issuer ${issuer.issuer}, subject ${subject ?? '(none)'} → ${name} (rule ${index}, ${rule.role}), until ${new Date(expiresAt).toISOString()}`,
    );
    return issued;
  }

  /**
   * R44: the principal an OIDC access token authenticates (`Authorization: Bearer <JWT>`, on
   * the API and POST /mcp). The token must come from an issuer configured with
   * `accessTokens: true`, be signed as R25 checks (its JWKS, its algorithms, `exp`/`nbf`, the
   * required claims but `jti`: an access token is used for many requests), carry `typ`
   * `at+jwt` (or `JWT`, or none), and be addressed to this service only: every `aud` one of
   * its resource URLs (RFC 8707: the service's URL and its MCP URL). The issuer's first
   * matching rule names the principal, as an exchange would (the principal is made or
   * renewed in the database, `oidc_issuer` = the issuer). The token itself is never passed
   * on. It is verified once (concurrent first uses share that) and remembered by its SHA-256
   * until it expires (at most PLANFENCE_OIDC_MAX_TOKEN_SECONDS); every request reads the
   * principal as the database has it (remembered until it changes on any instance, through
   * PrincipalChanges), so that a revocation stops the token at once. UNAUTHENTICATED for a
   * bad token or a revoked principal, FORBIDDEN when no rule maps it. (The planfence token
   * the exchange gives the principal is never handed out.)
   */
  async authenticateAccessToken(token: string): Promise<Principal> {
    const key = sha256(token);
    let grant = this.accessGrants.get(key);
    if (!grant || grant.until <= performance.now()) {
      let verifying = this.verifying.get(key);
      if (!verifying) {
        verifying = this.grantAccess(token);
        this.verifying.set(key, verifying);
        const done = () => this.verifying.delete(key);
        verifying.then(done, done);
      }
      grant = await verifying;
      this.accessGrants.set(key, grant);
      if (this.accessGrants.size > 10_000) {
        const now = performance.now();
        for (const [k, g] of this.accessGrants) if (g.until <= now) this.accessGrants.delete(k);
      }
    }
    return this.accessPrincipal(grant.name);
  }

  /** The principal `name` as the database has it (remembered until it changes); revoked: UNAUTHENTICATED. */
  private async accessPrincipal(name: string): Promise<Principal> {
    let principal = this.accessPrincipals.get(name);
    if (!principal) {
      const before = this.principalChanges;
      principal = (await this.db.read((m) => findOne(m, Principal, { name }))) ?? undefined;
      if (!principal) throw new AuthError('UNAUTHENTICATED', 'unknown token');
      if (before === this.principalChanges) this.accessPrincipals.set(name, principal);
    }
    if (principal.revokedAt) throw new AuthError('UNAUTHENTICATED', 'this principal was revoked');
    return principal;
  }

  /** The resource URLs an access token may be addressed to (RFC 8707): the service and its /mcp. */
  resourceUrls(): string[] {
    const { publicUrl, allowedHosts } = this.config.mcp;
    const bases: string[] = [];
    if (publicUrl) bases.push(publicUrl.replace(/\/+$/, ''));
    else {
      const server = this.adapterHost.httpAdapter?.getHttpServer() as Server | undefined;
      const address = server?.address();
      const port = address && typeof address === 'object' ? address.port : null;
      const hosts =
        allowedHosts ?? ['127.0.0.1', 'localhost', '[::1]'].map((name) => `${name}:${port}`);
      for (const host of hosts) bases.push(`http://${host}`);
    }
    return bases.flatMap((base) => [base, `${base}/mcp`]);
  }

  private async grantAccess(token: string): Promise<AccessGrant> {
    let unverified: JWTPayload;
    try {
      unverified = decodeJwt(token);
    } catch {
      throw new AuthError('UNAUTHENTICATED', 'unknown token');
    }
    const issuer = (this.config.identity.oidc?.issuers ?? []).find(
      (candidate) => candidate.accessTokens && candidate.issuer === unverified.iss,
    );
    if (!issuer)
      throw new AuthError(
        'UNAUTHENTICATED',
        'the access token is not from an issuer configured with accessTokens (PLANFENCE_OIDC_CONFIG)',
      );
    const subject = typeof unverified.sub === 'string' ? unverified.sub.slice(0, 255) : null;
    const refuse = async (code: 'UNAUTHENTICATED' | 'FORBIDDEN', message: string) => {
      await this.record({
        issuer: issuer.issuer,
        subject,
        principal: null,
        ruleIndex: null,
        outcome: 'REJECTED',
        code,
        detail: `access token: ${message}`,
      });
      return new AuthError(code, message);
    };
    const now = await this.clock.now();
    const resources = this.resourceUrls();
    let payload: JWTPayload;
    try {
      const keys = await this.keySet(issuer);
      const verified = await jwtVerify(token, keys, {
        issuer: issuer.issuer,
        audience: resources,
        algorithms: issuer.algorithms,
        clockTolerance: this.config.identity.clockToleranceSeconds,
        currentDate: new Date(now),
        requiredClaims: ['exp', ...issuer.requiredClaims.filter((claim) => claim !== 'jti')],
      });
      const typ = verified.protectedHeader.typ?.toLowerCase();
      if (typ !== undefined && !ACCESS_TOKEN_TYPES.includes(typ))
        throw new Error(`typ "${typ}" is not an access token's (at+jwt)`);
      const audiences = [verified.payload.aud ?? []].flat();
      const foreign = audiences.filter((aud) => !resources.includes(aud));
      if (foreign.length)
        throw new Error(
          `aud must be this service's resource URL only (${resources[0]}), not also ${foreign.map((a) => `"${a.slice(0, 100)}"`).join(', ')}`,
        );
      payload = verified.payload;
    } catch (error) {
      throw await refuse('UNAUTHENTICATED', `the access token was refused: ${describe(error)}`);
    }
    const { mapped, failures } = mapToRule(issuer, payload);
    if (!mapped)
      throw await refuse(
        'FORBIDDEN',
        `no rule of issuer ${issuer.issuer} matches this access token; claims that failed: ${failures.join('; ')}`,
      );
    const { rule, index, name } = mapped;
    if (!PRINCIPAL_NAME_PATTERN.test(name))
      throw await refuse(
        'FORBIDDEN',
        `rule ${index} makes the principal name "${name.slice(0, 80)}", which is not a valid name`,
      );
    const expiresAt = Math.min(
      (payload.exp as number) * 1000,
      now + this.config.identity.maxTokenSeconds * 1000,
    );
    let issued: IssuedToken;
    try {
      issued = await this.db.write(async (m) => {
        return this.grant(m, now, {
          issuer,
          subject,
          mapped,
          expiresAt,
          detail: 'access token',
        });
      });
    } catch (error) {
      if (error instanceof AuthError)
        throw await refuse(error.code as 'UNAUTHENTICATED' | 'FORBIDDEN', error.message);
      throw error;
    }
    this.accessPrincipals.set(name, issued.principal);
    this.logger.log(
      `OIDC access token: issuer ${issuer.issuer}, subject ${subject ?? '(none)'} → ${name} (rule ${index}, ${rule.role}), until ${new Date(expiresAt).toISOString()}`,
    );
    return { name, until: performance.now() + (expiresAt - now) };
  }

  private async verify(token: string, issuer: OidcIssuer, now: number): Promise<JWTPayload> {
    const keys = await this.keySet(issuer);
    const { payload } = await jwtVerify(token, keys, {
      issuer: issuer.issuer,
      audience: issuer.audience,
      algorithms: issuer.algorithms,
      clockTolerance: this.config.identity.clockToleranceSeconds,
      currentDate: new Date(now),
      requiredClaims: ['exp', ...issuer.requiredClaims],
    });
    if (Array.isArray(payload.aud) && payload.aud.length !== 1) {
      throw new Error(
        `aud must be exactly "${issuer.audience}", not ${payload.aud.length} audiences`,
      );
    }
    return payload;
  }

  /** The issuer's cached key set; its JWKS URL from the configuration or the discovery document. */
  private keySet(issuer: OidcIssuer): Promise<KeySet> {
    // Concurrent first uses share one discovery (and so one key set and its one JWKS fetch);
    // a failed one is not kept.
    let loading = this.keySets.get(issuer.issuer);
    if (!loading) {
      loading = this.loadKeySet(issuer);
      this.keySets.set(issuer.issuer, loading);
      loading.catch(() => {
        if (this.keySets.get(issuer.issuer) === loading) this.keySets.delete(issuer.issuer);
      });
    }
    return loading;
  }

  private async loadKeySet(issuer: OidcIssuer): Promise<KeySet> {
    const { jwksTimeoutMs, jwksCooldownMs } = this.config.identity;
    const uri =
      issuer.jwksUri ?? (await this.remembered(issuer.issuer, () => this.discover(issuer)));
    const keys = createRemoteJWKSet(new URL(uri), {
      timeoutDuration: jwksTimeoutMs,
      cooldownDuration: jwksCooldownMs,
      cacheMaxAge: Math.max(jwksCooldownMs, 600_000),
      [customFetch]: (url: string, init: RequestInit) =>
        this.remembered(url, () =>
          fetchBounded(url, {
            timeoutMs: jwksTimeoutMs,
            maxBytes: MAX_JWKS_BYTES,
            signal: init.signal,
          }),
        ),
    });
    return keys;
  }

  /**
   * `fetch()`, unless it failed for `key` less than PLANFENCE_OIDC_FAILURE_CACHE_SECONDS
   * ago: then the same failure at once, without asking the issuer again.
   */
  private async remembered<T>(key: string, fetch: () => Promise<T>): Promise<T> {
    const failed = this.failedFetches.get(key);
    if (failed && failed.until > performance.now()) throw failed.error;
    try {
      const result = await fetch();
      this.failedFetches.delete(key);
      return result;
    } catch (error) {
      const ms = this.config.identity.fetchFailureCacheMs;
      if (ms > 0 && error instanceof Error) {
        this.failedFetches.set(key, { error, until: performance.now() + ms });
        if (this.failedFetches.size > 1000) {
          const now = performance.now();
          for (const [k, v] of this.failedFetches) if (v.until <= now) this.failedFetches.delete(k);
        }
      }
      throw error;
    }
  }

  private async discover(issuer: OidcIssuer): Promise<string> {
    const url = `${issuer.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    let document: { issuer?: unknown; jwks_uri?: unknown };
    try {
      const response = await fetchBounded(url, {
        timeoutMs: this.config.identity.jwksTimeoutMs,
        maxBytes: MAX_DISCOVERY_BYTES,
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      document = (await response.json()) as typeof document;
    } catch (error) {
      throw new Error(`cannot read the issuer's discovery document ${url}: ${describe(error)}`);
    }
    if (document.issuer !== issuer.issuer || typeof document.jwks_uri !== 'string') {
      throw new Error(`the discovery document ${url} does not name this issuer and a jwks_uri`);
    }
    return document.jwks_uri;
  }

  private async record(entry: ExchangeRecord): Promise<void> {
    const now = await this.clock.now();
    await this.db
      .write((m) => this.insertRecord(m, now, entry))
      .catch((error: unknown) =>
        this.logger.warn(`could not record an OIDC exchange: ${(error as Error).message}`),
      );
    this.logger.warn(
      `OIDC exchange refused: issuer ${entry.issuer}, subject ${entry.subject ?? '(none)'}: ${entry.code} ${entry.detail}`,
    );
  }

  /** Grants the mapped rule's principal its token until `expiresAt`, and records the accepted exchange. */
  private async grant(
    m: Transaction,
    now: number,
    p: {
      issuer: OidcIssuer;
      subject: string | null;
      mapped: { rule: OidcRule; index: number; name: string };
      expiresAt: number;
      detail: string | null;
    },
  ): Promise<IssuedToken> {
    const { rule, index, name } = p.mapped;
    const granted = await this.auth.exchangePrincipal(m, {
      name,
      role: rule.role,
      groups: rule.groups,
      environments: rule.environments,
      issuer: p.issuer.issuer,
      expiresAt: p.expiresAt,
      now,
    });
    await this.insertRecord(m, now, {
      issuer: p.issuer.issuer,
      subject: p.subject,
      principal: name,
      ruleIndex: index,
      outcome: 'ACCEPTED',
      code: null,
      detail: p.detail,
    });
    return granted;
  }

  private insertRecord(
    m: Parameters<typeof execute>[0],
    now: number,
    entry: ExchangeRecord,
  ): Promise<unknown> {
    return execute(
      m,
      `INSERT INTO oidc_exchanges (at, issuer, subject, principal, rule_index, outcome, code, detail)
       VALUES (:at, :issuer, :subject, :principal, :ruleIndex, :outcome, :code, :detail)`,
      { at: now, ...entry, detail: entry.detail?.slice(0, 2000) ?? null },
    );
  }
}

/** A short reason for a verification failure (jose's codes say what failed). */
function describe(error: unknown): string {
  if (error instanceof joseErrors.JWKSTimeout)
    return "the issuer's keys could not be fetched in time";
  if (error instanceof joseErrors.JOSEError) return `${error.code}: ${error.message}`;
  return (error as Error).message ?? String(error);
}
