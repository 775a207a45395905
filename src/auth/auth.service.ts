import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database, execute, select } from '../database/database.js';
import { AuthError } from './auth.errors.js';
import { type IssuedToken, Principal, Role } from './principal.entity.js';
import { exists, findOne, findOneOrFail, insertRow } from '../database/rows.js';

export const ADMIN_NAME = 'admin';

function newToken(): string {
  return `pf_${randomBytes(32).toString('base64url')}`;
}

@Injectable()
export class AuthService implements OnApplicationBootstrap {
  private readonly logger = new Logger(AuthService.name);

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /**
   * `PLANFENCE_ADMIN_TOKEN`, when set, is the admin's token. Otherwise the first start
   * creates one and writes it once to a file only its owner can read.
   */
  async onApplicationBootstrap(): Promise<void> {
    const now = await this.clock.now();
    const configured = this.config.adminToken;
    const created = await this.db.write(async (m) => {
      const admin = await findOne(m, Principal, { name: ADMIN_NAME });
      if (configured) {
        const tokenHash = sha256(configured);
        if (!admin) {
          await insertRow(m, Principal, {
            name: ADMIN_NAME,
            role: Role.ADMIN,
            tokenHash,
            createdAt: new Date(now),
            revokedAt: null,
          });
        } else if (admin.tokenHash !== tokenHash || admin.role !== Role.ADMIN) {
          await m.update(Principal, { name: ADMIN_NAME }, { tokenHash, role: Role.ADMIN });
        }
        return null;
      }
      if (admin) return null;
      const token = newToken();
      await insertRow(m, Principal, {
        name: ADMIN_NAME,
        role: Role.ADMIN,
        tokenHash: sha256(token),
        createdAt: new Date(now),
        revokedAt: null,
      });
      return token;
    });
    if (created) {
      mkdirSync(dirname(this.config.adminTokenFile), { recursive: true });
      writeFileSync(this.config.adminTokenFile, `${created}\n`, { mode: 0o600 });
      this.logger.log(
        `created the admin token; it is in ${this.config.adminTokenFile} (readable by its owner only)`,
      );
    }
  }

  /** The principal a bearer header names; UNAUTHENTICATED for a missing, malformed, unknown or revoked token. */
  async authenticate(header: string | undefined): Promise<Principal> {
    if (!header)
      throw new AuthError('UNAUTHENTICATED', 'missing Authorization: Bearer <token> header');
    const match = /^Bearer ([A-Za-z0-9._~+/=-]{1,512})$/.exec(header.trim());
    if (!match)
      throw new AuthError(
        'UNAUTHENTICATED',
        'malformed Authorization header: expected "Bearer <token>"',
      );
    const principal = await this.db.read((m) =>
      findOne(m, Principal, { tokenHash: sha256(match[1]) }),
    );
    if (!principal) throw new AuthError('UNAUTHENTICATED', 'unknown token');
    if (principal.revokedAt) throw new AuthError('UNAUTHENTICATED', 'this token was revoked');
    return principal;
  }

  async issueToken(name: string, role: Role): Promise<IssuedToken> {
    const token = newToken();
    const now = await this.clock.now();
    const principal = await this.db.write(async (m) => {
      if (await exists(m, Principal, { name })) {
        throw new AuthError('ALREADY_EXISTS', `principal "${name}" already exists`);
      }
      const created = {
        name,
        role,
        tokenHash: sha256(token),
        createdAt: new Date(now),
        revokedAt: null,
      };
      await insertRow(m, Principal, created);
      return findOneOrFail(m, Principal, { name });
    });
    this.logger.log(`issued a ${role} token to ${name}`);
    return { principal, token };
  }

  async revokeToken(name: string): Promise<Principal> {
    const now = await this.clock.now();
    const principal = await this.db.write(async (m) => {
      const found = await findOne(m, Principal, { name });
      if (!found) throw new AuthError('NOT_FOUND', `principal "${name}" does not exist`);
      if (!found.revokedAt) await m.update(Principal, { name }, { revokedAt: new Date(now) });
      return findOneOrFail(m, Principal, { name });
    });
    this.logger.log(`revoked the token of ${name}`);
    return principal;
  }

  /** R14: replaces the principal's groups (duplicates count once). NOT_FOUND for an unknown principal. */
  async setPrincipalGroups(name: string, groups: string[]): Promise<Principal> {
    const principal = await this.db.write(async (m) => {
      const found = await findOne(m, Principal, { name });
      if (!found) throw new AuthError('NOT_FOUND', `principal "${name}" does not exist`);
      await execute(m, 'DELETE FROM principal_groups WHERE principal = :name', { name });
      for (const group of new Set(groups)) {
        await execute(
          m,
          'INSERT INTO principal_groups (principal, group_name) VALUES (:name, :group)',
          { name, group },
        );
      }
      return found;
    });
    this.logger.log(`set the groups of ${name}: ${[...new Set(groups)].join(', ') || '(none)'}`);
    return principal;
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
