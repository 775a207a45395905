import { createHash, randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuthError } from '../auth/auth.errors.js';
import { AuthService } from '../auth/auth.service.js';
import { Principal } from '../model/principal.entity.js';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import type { OidcLogin } from '../config/oidc-config.js';
import { Database, execute, select } from '../database/database.js';
import { findOne, findOneOrFail } from '../database/rows.js';
import { PrincipalChanges } from '../auth/principal-changes.js';
import { firstMatchingRule, principalNameOf } from './login-rules.js';
import { Session, SESSION_PREFIX, type SessionKind, type SessionRow } from './session.entity.js';
import { SignInRefused } from './sessions.errors.js';

/** A session's last use is written at most this often (its idle timeout is judged to this precision). */
const TOUCH_EVERY_MS = 60_000;
/** How long `planfence login`'s one-time code may wait for its exchange. */
const CODE_LIFETIME_MS = 120_000;

/** The claims of a verified ID token, as a sign-in reads them. */
export type IdClaims = Record<string, unknown> & { iss: string; sub: string };

/** The CSRF token of a session (R42): derived from its secret, so never stored. */
export function csrfTokenOf(secret: string): string {
  return createHash('sha256').update(`planfence-csrf:${secret}`).digest('base64url');
}

function newSecret(): string {
  return `${SESSION_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** What a successful sign-in made: the session's secret goes into the cookie (or to the CLI). */
export interface SignedIn {
  principal: Principal;
  session: SessionRow;
  /** The cookie's value; for a command line's session, null until its code is exchanged. */
  secret: string | null;
  /** A command line's one-time code. */
  code: string | null;
}

/** A request's session: the principal it names, and the session itself. */
export interface Authenticated {
  principal: Principal;
  session: SessionRow;
}

/**
 * People's sessions (DESIGN §19, R40–R41). A sign-in maps the ID token's claims to a
 * principal by the login's first matching rule: the principal that (issuer, subject) made
 * before, or a new one; it takes the rule's role, groups and environments, and records the
 * person's email and name. A session is a credential like a token: stored hashed, ending
 * at its absolute lifetime, after `idleMinutes` unused, at logout, when an ADMIN ends it,
 * or when its principal is revoked; every request reads it from the database, so an end
 * on one instance holds on every other at once.
 */
@Injectable()
export class SessionsService implements OnModuleInit {
  private readonly logger = new Logger(SessionsService.name);

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly auth: AuthService,
    private readonly changes: PrincipalChanges,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  onModuleInit(): void {
    this.auth.useSessions((secret) => this.authenticate(secret));
  }

  /** The providers people sign in with (none: sign-in is off). */
  logins(): OidcLogin[] {
    return this.config.identity.oidc?.logins ?? [];
  }

  /**
   * R40: maps a verified ID token to a principal and opens a session. SignInRefused (a page
   * for the person; the attempt recorded in oidc_exchanges) when no rule matches, the
   * principal was revoked, or the rule's name belongs to another principal: nothing is created.
   */
  async signIn(
    login: OidcLogin,
    claims: IdClaims,
    kind: SessionKind,
    codeChallenge: string | null = null,
  ): Promise<SignedIn> {
    const subject = claims.sub;
    const matched = firstMatchingRule(login.rules, claims);
    const email = typeof claims.email === 'string' ? claims.email.slice(0, 320) : null;
    const name = typeof claims.name === 'string' ? claims.name.slice(0, 255) : null;
    if (!matched) {
      await this.refuse(login, subject, null, null, 'no login rule matches this person');
      throw new SignInRefused(
        'No sign-in rule of this service matches your account. Ask an administrator to add one (docs/identity.md).',
      );
    }
    const now = await this.clock.now();
    const secret = kind === 'console' ? newSecret() : null;
    const code = kind === 'cli' ? newSecret() : null;
    const { rule, index } = matched;
    try {
      return await this.db.write(async (m) => {
        let principal = await findOne(m, Principal, {
          personIssuer: login.issuer,
          personSubject: subject,
        });
        if (principal?.revokedAt)
          throw new SignInRefused(
            `Your principal "${principal.name}" was revoked; an administrator must act before you can sign in.`,
          );
        const environments = rule.environments?.length
          ? JSON.stringify([...new Set(rule.environments)])
          : null;
        if (!principal) {
          const named = principalNameOf(rule.principal, claims);
          if ('problem' in named) throw new SignInRefused(`You cannot sign in: ${named.problem}.`);
          const created = await execute(
            m,
            `INSERT INTO principals (name, role, token_hash, created_at, revoked_at, environments,
               expires_at, oidc_issuer, person_issuer, person_subject, person_email, person_name)
             VALUES (:name, :role, :tokenHash, :now, NULL, :environments, NULL, NULL,
               :issuer, :subject, :email, :personName)
             ON CONFLICT (name) DO NOTHING`,
            {
              name: named.name,
              role: rule.role,
              // A person's principal has no bearer token of its own: nobody knows this one.
              tokenHash: sha256(newSecret()),
              now,
              environments,
              issuer: login.issuer,
              subject,
              email,
              personName: name,
            },
          );
          if (!created)
            throw new SignInRefused(
              `You cannot sign in: the name "${named.name}" belongs to another principal.`,
            );
          principal = await findOneOrFail(m, Principal, { name: named.name });
        } else {
          await execute(
            m,
            `UPDATE principals SET role = :role, environments = :environments,
               person_email = :email, person_name = :personName WHERE name = :name`,
            { role: rule.role, environments, email, personName: name, name: principal.name },
          );
          // Its other sessions and anything remembered of it follow the rule's access now.
          this.changes.changed(m, principal.name);
        }
        await execute(m, 'DELETE FROM principal_groups WHERE principal = :name', {
          name: principal.name,
        });
        for (const group of new Set(rule.groups))
          await execute(
            m,
            'INSERT INTO principal_groups (principal, group_name) VALUES (:name, :group)',
            { name: principal.name, group },
          );
        const session: SessionRow = {
          id: `ses_${randomBytes(12).toString('base64url')}`,
          principal: principal.name,
          kind,
          createdAt: now,
          lastSeenAt: now,
          expiresAt: now + login.sessionHours * 3_600_000,
          idleMinutes: login.idleMinutes,
          endedAt: null,
        };
        await execute(
          m,
          `INSERT INTO sessions (id, principal, token_hash, kind, created_at, last_seen_at,
             expires_at, idle_minutes, ended_at, code_hash, code_challenge, code_expires_at)
           VALUES (:id, :principal, :tokenHash, :kind, :createdAt, :lastSeenAt, :expiresAt,
             :idleMinutes, NULL, :codeHash, :codeChallenge, :codeExpiresAt)`,
          {
            ...session,
            tokenHash: sha256(secret ?? newSecret()),
            codeHash: code ? sha256(code) : null,
            codeChallenge: code ? codeChallenge : null,
            codeExpiresAt: code ? now + CODE_LIFETIME_MS : null,
          },
        );
        await this.record(
          m,
          now,
          login.issuer,
          subject,
          principal.name,
          index,
          'ACCEPTED',
          null,
          `sign-in (${kind})`,
        );
        principal = await findOneOrFail(m, Principal, { name: principal.name });
        this.logger.log(
          `${principal.name} signed in (${login.issuer}, subject ${subject}, ${kind})`,
        );
        return { principal, session, secret, code };
      });
    } catch (error) {
      if (error instanceof SignInRefused) {
        await this.refuse(login, subject, null, index, error.message);
      }
      throw error;
    }
  }

  private async refuse(
    login: OidcLogin,
    subject: string,
    principal: string | null,
    ruleIndex: number | null,
    detail: string,
  ): Promise<void> {
    const now = await this.clock.now();
    await this.db.write((m) =>
      this.record(
        m,
        now,
        login.issuer,
        subject,
        principal,
        ruleIndex,
        'REJECTED',
        'FORBIDDEN',
        `sign-in refused: ${detail}`,
      ),
    );
    this.logger.warn(`sign-in refused (${login.issuer}, subject ${subject}): ${detail}`);
  }

  private record(
    m: EntityManager,
    at: number,
    issuer: string,
    subject: string,
    principal: string | null,
    ruleIndex: number | null,
    outcome: 'ACCEPTED' | 'REJECTED',
    code: string | null,
    detail: string,
  ): Promise<unknown> {
    return execute(
      m,
      `INSERT INTO oidc_exchanges (at, issuer, subject, principal, rule_index, outcome, code, detail)
       VALUES (:at, :issuer, :subject, :principal, :ruleIndex, :outcome, :code, :detail)`,
      {
        at,
        issuer,
        subject: subject.slice(0, 255),
        principal,
        ruleIndex,
        outcome,
        code,
        detail: detail.slice(0, 2000),
      },
    );
  }

  /**
   * `planfence login`: the one-time code (and the verifier of the challenge given at
   * /auth/login) for the session's secret. The code works once, within two minutes.
   */
  async exchangeCode(
    code: string,
    verifier: string,
  ): Promise<{ secret: string; session: SessionRow }> {
    const now = await this.clock.now();
    const secret = newSecret();
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    return this.db.write(async (m) => {
      const changed = await execute(
        m,
        `UPDATE sessions SET token_hash = :tokenHash, code_hash = NULL, code_challenge = NULL,
           code_expires_at = NULL, last_seen_at = :now
         WHERE code_hash = :codeHash AND code_expires_at > :now AND code_challenge = :challenge
           AND ended_at IS NULL`,
        { tokenHash: sha256(secret), codeHash: sha256(code), now, challenge },
      );
      if (!changed)
        throw new AuthError(
          'UNAUTHENTICATED',
          'this sign-in code is unknown, used, expired or not yours',
        );
      const [row] = await select<RawSession>(m, `${SELECT_SESSION} WHERE token_hash = :h`, {
        h: sha256(secret),
      });
      return { secret, session: sessionOf(row) };
    });
  }

  /**
   * The principal a session secret names (a cookie's value, or a command line's bearer
   * token); UNAUTHENTICATED once it ended, expired, went idle or its principal was revoked.
   */
  async authenticate(secret: string): Promise<Authenticated> {
    const now = await this.clock.now();
    const found = await this.db.read(async (m) => {
      const [row] = await select<RawSession>(
        m,
        `${SELECT_SESSION} WHERE token_hash = :h AND code_hash IS NULL`,
        { h: sha256(secret) },
      );
      if (!row) return null;
      return {
        session: sessionOf(row),
        principal: await findOne(m, Principal, { name: row.principal }),
      };
    });
    if (!found?.principal) throw new AuthError('UNAUTHENTICATED', 'unknown session: sign in again');
    const { session, principal } = found;
    if (session.endedAt !== null)
      throw new AuthError('UNAUTHENTICATED', 'this session ended: sign in again');
    if (now >= session.expiresAt)
      throw new AuthError('UNAUTHENTICATED', 'this session reached its lifetime: sign in again');
    if (now - session.lastSeenAt >= session.idleMinutes * 60_000)
      throw new AuthError(
        'UNAUTHENTICATED',
        `this session was unused for ${session.idleMinutes} minutes: sign in again`,
      );
    if (principal.revokedAt)
      throw new AuthError('UNAUTHENTICATED', `principal "${principal.name}" was revoked`);
    if (now - session.lastSeenAt >= TOUCH_EVERY_MS) {
      await this.db.write((m) =>
        execute(
          m,
          'UPDATE sessions SET last_seen_at = :now WHERE id = :id AND last_seen_at < :now',
          {
            now,
            id: session.id,
          },
        ),
      );
      session.lastSeenAt = now;
    }
    return { session, principal };
  }

  /** Ends one session (logout, or an ADMIN's endSession); false when it was unknown or had ended. */
  async end(id: string): Promise<boolean> {
    const now = await this.clock.now();
    const ended = await this.db.write(async (m) => {
      const [row] = await select<{ principal: string }>(
        m,
        'SELECT principal FROM sessions WHERE id = :id',
        { id },
      );
      const changed = await execute(
        m,
        'UPDATE sessions SET ended_at = :now WHERE id = :id AND ended_at IS NULL',
        {
          now,
          id,
        },
      );
      // Open sockets of the principal are checked again (PrincipalChanges).
      if (changed && row) this.changes.changed(m, row.principal);
      return Boolean(changed);
    });
    if (ended) this.logger.log(`session ${id} ended`);
    return ended;
  }

  /** Sessions not ended, newest first; of one principal when named (ADMIN). */
  async list(principal: string | null, first: number): Promise<SessionRow[]> {
    const now = await this.clock.now();
    const rows = await this.db.read((m) =>
      select<RawSession>(
        m,
        `${SELECT_SESSION} WHERE ended_at IS NULL AND code_hash IS NULL AND expires_at > :now
           AND (:principal = '' OR principal = :principal)
         ORDER BY created_at DESC, id LIMIT :first`,
        { now, principal: principal ?? '', first: Math.max(1, Math.min(first, 500)) },
      ),
    );
    return rows.map(sessionOf).filter((s) => now - s.lastSeenAt < s.idleMinutes * 60_000);
  }

  /** The GraphQL view of a session; csrfToken only for the caller's own (mySession). */
  view(session: SessionRow, secret: string | null = null): Session {
    return {
      id: session.id,
      principalName: session.principal,
      csrfToken: secret ? csrfTokenOf(secret) : null,
      createdAt: new Date(session.createdAt),
      lastSeenAt: new Date(session.lastSeenAt),
      expiresAt: new Date(
        Math.min(session.expiresAt, session.lastSeenAt + session.idleMinutes * 60_000),
      ),
    };
  }
}

const SELECT_SESSION = `SELECT id, principal, kind, created_at, last_seen_at, expires_at, idle_minutes, ended_at FROM sessions`;

interface RawSession {
  id: string;
  principal: string;
  kind: string;
  created_at: number | string;
  last_seen_at: number | string;
  expires_at: number | string;
  idle_minutes: number | string;
  ended_at: number | string | null;
}

function sessionOf(row: RawSession): SessionRow {
  return {
    id: row.id,
    principal: row.principal,
    kind: row.kind as SessionKind,
    createdAt: Number(row.created_at),
    lastSeenAt: Number(row.last_seen_at),
    expiresAt: Number(row.expires_at),
    idleMinutes: Number(row.idle_minutes),
    endedAt: row.ended_at === null ? null : Number(row.ended_at),
  };
}
