import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute, select } from '../database/database.js';
import type { Transaction } from '../database/transaction.js';
import { PrincipalChanges } from './principal-changes.js';
import { bootstrapAdmin, newToken } from './admin-bootstrap.js';
import { AuthError } from './auth.errors.js';
import { PrincipalMemory, unchecked } from './principal-memory.js';
import { type IssuedToken, Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';
import { exists, findOne, findOneOrFail, insertRow } from '../database/rows.js';

/** Session secrets start with it (src/sessions/session.entity.ts SESSION_PREFIX). */
const SESSION_TOKEN_PREFIX = 'pfs_';

/** What a session secret authenticates: its principal and the session (src/sessions/). */
export interface SessionAuthentication {
  principal: Principal;
  session: { id: string; principal: string; kind: string };
}

/** What a token may do besides its role (R14, R26). */
export interface TokenScope {
  groups?: string[] | null;
  /** Environment name patterns; null or empty: all. */
  environments?: string[] | null;
  /** Lifetime from now, by the service clock; null: no expiry. */
  expiresInSeconds?: number | null;
}

@Injectable()
export class AuthService implements OnApplicationBootstrap {
  private readonly logger = new Logger(AuthService.name);
  private readonly memory = new PrincipalMemory();
  /** SQLite: a remembered principal is exact; PostgreSQL: a candidate its decision checks (see PrincipalMemory). */
  private readonly exactMemory: boolean;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly changes: PrincipalChanges,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.exactMemory = db.dialect === 'sqlite';
    changes.onChange((name) => this.memory.forget(name));
  }

  /** People's sessions (src/sessions/): a secret's principal and session, once that module is in. */
  private sessions: ((secret: string) => Promise<SessionAuthentication>) | null = null;

  /** Called by SessionsService: bearer tokens that are session secrets (`pfs_`) go to it. */
  useSessions(authenticate: (secret: string) => Promise<SessionAuthentication>): void {
    this.sessions = authenticate;
  }

  /** R44: OIDC access tokens (JWTs), once the identity service takes them. */
  private accessTokens: ((token: string) => Promise<Principal>) | null = null;

  /** Called by OidcService: bearer tokens that are JWTs go to it (R44). */
  useAccessTokens(authenticate: (token: string) => Promise<Principal>): void {
    this.accessTokens = authenticate;
  }

  /**
   * A session secret's principal and session (R41): from a cookie or a `pfs_` bearer token.
   * UNAUTHENTICATED when sessions are not served or the session no longer authenticates.
   */
  authenticateSession(secret: string): Promise<SessionAuthentication> {
    if (!this.sessions) return Promise.reject(new AuthError('UNAUTHENTICATED', 'unknown session'));
    return this.sessions(secret);
  }

  /** The admin's token, from PLANFENCE_ADMIN_TOKEN or a new token file (see bootstrapAdmin). */
  onApplicationBootstrap(): Promise<void> {
    return bootstrapAdmin({
      db: this.db,
      clock: this.clock,
      changes: this.changes,
      config: this.config,
      logger: this.logger,
    });
  }

  /**
   * The principal a bearer header names; UNAUTHENTICATED for a missing, empty, malformed, unknown,
   * revoked or expired token (R26: expired by the service clock, at its instant).
   *
   * `unchecked` (the operation's decision checks the token itself, `@TokenCheckedInDecision`):
   * on PostgreSQL a principal in memory is answered without reading the row, marked with the
   * check its decision makes (tokenCheckOf).
   */
  async authenticate(
    header: string | undefined,
    { unchecked: mayBeUnchecked = false }: { unchecked?: boolean } = {},
  ): Promise<Principal> {
    if (!header)
      throw new AuthError('UNAUTHENTICATED', 'missing Authorization: Bearer <token> header');
    const trimmed = header.trim();
    // "Bearer " with nothing after it: a client whose token variable was empty.
    if (/^Bearer$/i.test(trimmed))
      throw new AuthError('UNAUTHENTICATED', 'no token: expected "Bearer <token>"');
    // R44: a JWT (an OIDC issuer's access token) goes to the identity service.
    const jwt = /^Bearer (eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/.exec(trimmed);
    if (jwt && jwt[1].length <= 8192) {
      if (!this.accessTokens) throw new AuthError('UNAUTHENTICATED', 'unknown token');
      return this.accessTokens(jwt[1]);
    }
    const match = /^Bearer ([A-Za-z0-9._~+/=-]{1,512})$/.exec(trimmed);
    if (!match)
      throw new AuthError(
        'UNAUTHENTICATED',
        'malformed Authorization header: expected "Bearer <token>"',
      );
    if (match[1].startsWith(SESSION_TOKEN_PREFIX))
      return (await this.authenticateSession(match[1])).principal;
    const tokenHash = sha256(match[1]);
    const remembered =
      this.exactMemory || mayBeUnchecked ? (this.memory.get(tokenHash) ?? null) : null;
    let principal = remembered && !this.exactMemory ? unchecked(remembered) : remembered;
    if (!principal) {
      const changesBefore = this.memory.changes;
      principal = await this.db.read((m) => findOne(m, Principal, { tokenHash }));
      if (principal && !principal.revokedAt) this.memory.keep(tokenHash, principal, changesBefore);
    }
    if (!principal) throw new AuthError('UNAUTHENTICATED', 'unknown token');
    if (principal.revokedAt) throw new AuthError('UNAUTHENTICATED', 'this token was revoked');
    if (principal.expiresAt && principal.expiresAt.getTime() <= (await this.clock.now())) {
      throw new AuthError(
        'UNAUTHENTICATED',
        `this token expired at ${principal.expiresAt.toISOString()}`,
      );
    }
    return principal;
  }

  /**
   * A new principal with a new token: groups, environment patterns (null: all) and a
   * lifetime (null: no expiry) are written in the same transaction. ALREADY_EXISTS when the
   * name is taken.
   */
  async issueToken(name: string, role: Role, scope: TokenScope = {}): Promise<IssuedToken> {
    const token = newToken();
    const now = await this.clock.now();
    const principal = await this.db.write(async (m) => {
      if (await exists(m, Principal, { name })) {
        throw new AuthError('ALREADY_EXISTS', `principal "${name}" already exists`);
      }
      await insertRow(m, Principal, {
        name,
        role,
        tokenHash: sha256(token),
        createdAt: new Date(now),
        revokedAt: null,
        environments: scope.environments?.length ? [...new Set(scope.environments)] : null,
        expiresAt: scope.expiresInSeconds ? new Date(now + scope.expiresInSeconds * 1000) : null,
        oidcIssuer: null,
      });
      await this.writeGroups(m, name, scope.groups ?? []);
      return findOneOrFail(m, Principal, { name });
    });
    this.logger.log(`issued a ${role} token to ${name}`);
    return { principal, token };
  }

  /**
   * The principal an OIDC exchange maps to (R25), with a new token that expires at
   * `expiresAt`. A new name makes a new principal owned by `issuer`; a name this issuer's
   * exchanges made before gets the new token, role, groups, environments and expiry (its
   * previous token stops at once: one token per principal). FORBIDDEN when the name belongs
   * to an issued token or another issuer, or was revoked. Runs in the caller's transaction.
   */
  async exchangePrincipal(
    m: Transaction,
    grant: {
      name: string;
      role: Role;
      groups: string[];
      environments: string[] | null;
      issuer: string;
      expiresAt: number;
      now: number;
    },
  ): Promise<IssuedToken> {
    const token = newToken();
    const values = {
      name: grant.name,
      role: grant.role,
      tokenHash: sha256(token),
      environments: grant.environments?.length
        ? JSON.stringify([...new Set(grant.environments)])
        : null,
      expiresAt: grant.expiresAt,
      issuer: grant.issuer,
      now: grant.now,
    };
    const renewed = await execute(
      m,
      `UPDATE principals SET token_hash = :tokenHash, role = :role, environments = :environments,
         expires_at = :expiresAt
       WHERE name = :name AND oidc_issuer = :issuer AND revoked_at IS NULL`,
      values,
    );
    if (renewed) {
      this.changes.changed(m, grant.name);
    } else {
      const created = await execute(
        m,
        `INSERT INTO principals (name, role, token_hash, created_at, revoked_at, environments, expires_at, oidc_issuer)
         VALUES (:name, :role, :tokenHash, :now, NULL, :environments, :expiresAt, :issuer)
         ON CONFLICT (name) DO NOTHING`,
        values,
      );
      if (!created) {
        throw new AuthError(
          'FORBIDDEN',
          `principal "${grant.name}" exists and is not one this issuer's exchanges may renew (an issued token, another issuer's, or revoked)`,
        );
      }
    }
    await this.writeGroups(m, grant.name, grant.groups);
    return { principal: await findOneOrFail(m, Principal, { name: grant.name }), token };
  }

  /**
   * R26: a new secret for `name`; the old one stops at once, on every instance, and its
   * open WebSockets close. Role, groups, environments and expiry stay. NOT_FOUND for an
   * unknown principal, FORBIDDEN for a revoked one.
   */
  async rotateToken(name: string): Promise<IssuedToken> {
    const token = newToken();
    const principal = await this.db.write(async (m) => {
      const rotated = await execute(
        m,
        'UPDATE principals SET token_hash = :tokenHash WHERE name = :name AND revoked_at IS NULL',
        { tokenHash: sha256(token), name },
      );
      const found = await findOne(m, Principal, { name });
      if (!found) throw new AuthError('NOT_FOUND', `principal "${name}" does not exist`);
      if (!rotated) {
        throw new AuthError('FORBIDDEN', `principal "${name}" was revoked; issue a new token`);
      }
      this.changes.changed(m, name);
      return found;
    });
    this.logger.log(`rotated the token of ${name}`);
    return { principal, token };
  }

  /** Every principal, in name order (ADMIN). */
  list(): Promise<Principal[]> {
    return this.db.read((m) => m.find(Principal, { order: { name: 'ASC' } }));
  }

  /**
   * Revokes `name`'s token; revoking a revoked one changes nothing. The last ADMIN whose
   * token works cannot be revoked (FORBIDDEN): one conditional statement decides, and on
   * PostgreSQL revocations of admins take a transaction lock so that two admins revoking
   * each other cannot both succeed. Open WebSockets of the principal close at once, on
   * every instance (PrincipalChanges).
   */
  async revokeToken(name: string): Promise<Principal> {
    const now = await this.clock.now();
    const principal = await this.db.write(async (m) => {
      if (this.db.dialect === 'postgres') {
        await select(m, 'SELECT pg_advisory_xact_lock(:key)', { key: ADMIN_REVOCATION_LOCK });
      }
      const revoked = await execute(
        m,
        `UPDATE principals SET revoked_at = :now
         WHERE name = :name AND revoked_at IS NULL
           AND (role <> :admin OR EXISTS (
             SELECT 1 FROM principals other
             WHERE other.role = :admin AND other.revoked_at IS NULL AND other.name <> :name))`,
        { now: now, name, admin: Role.ADMIN },
      );
      const found = await findOne(m, Principal, { name });
      if (!found) throw new AuthError('NOT_FOUND', `principal "${name}" does not exist`);
      if (!revoked && !found.revokedAt) {
        throw new AuthError(
          'FORBIDDEN',
          `"${name}" is the last admin whose token works; issue another ADMIN token first (docs/operations.md, "Lost or revoked admin access")`,
        );
      }
      if (revoked) this.changes.changed(m, name);
      return found;
    });
    this.logger.log(`revoked the token of ${name}`);
    return principal;
  }

  /** R14: replaces the principal's groups (duplicates count once). NOT_FOUND for an unknown principal. */
  async setPrincipalGroups(name: string, groups: string[]): Promise<Principal> {
    const principal = await this.db.write(async (m) => {
      const found = await findOne(m, Principal, { name });
      if (!found) throw new AuthError('NOT_FOUND', `principal "${name}" does not exist`);
      await this.writeGroups(m, name, groups);
      return found;
    });
    this.logger.log(`set the groups of ${name}: ${[...new Set(groups)].join(', ') || '(none)'}`);
    return principal;
  }

  private async writeGroups(m: EntityManager, name: string, groups: string[]): Promise<void> {
    await execute(m, 'DELETE FROM principal_groups WHERE principal = :name', { name });
    for (const group of new Set(groups)) {
      await execute(
        m,
        'INSERT INTO principal_groups (principal, group_name) VALUES (:name, :group)',
        { name, group },
      );
    }
  }

  /** The principal's groups, by name. */
  groupsOf(name: string): Promise<string[]> {
    return this.db.read(async (m) =>
      (
        await select<{ group_name: string }>(
          m,
          'SELECT group_name FROM principal_groups WHERE principal = :name ORDER BY group_name',
          { name },
        )
      ).map((row) => row.group_name),
    );
  }
}

/** Transaction lock key that orders revocations on PostgreSQL (an arbitrary constant). */
const ADMIN_REVOCATION_LOCK = 7_114_020_11;
