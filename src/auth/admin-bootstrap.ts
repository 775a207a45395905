import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  constants as fsConstants,
  fchmodSync,
  fsyncSync,
  mkdirSync,
  openSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import type { LoggerService } from '@nestjs/common';
import type { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import type { Config } from '../config/config.js';
import { type Database, execute } from '../database/database.js';
import { exists, findOne, insertRow } from '../database/rows.js';
import type { PrincipalChanges } from './principal-changes.js';
import { Principal } from '../model/principal.entity.js';
import { Role } from '../common/role.js';

export const ADMIN_NAME = 'admin';

/** A new bearer token: 32 random bytes. */
export function newToken(): string {
  return `pf_${randomBytes(32).toString('base64url')}`;
}

export interface AdminBootstrapDeps {
  db: Database;
  clock: Clock;
  changes: PrincipalChanges;
  config: Config;
  logger: LoggerService;
}

/**
 * `PLANFENCE_ADMIN_TOKEN`, when set, is the admin's token: the row `admin` gets its hash,
 * the ADMIN role and no revocation (so a restart with a new token restores access). When
 * it replaces another stored token, the start warns (naming the token file, whose token
 * stops working). Otherwise the first start creates a token and writes it to a new file
 * only its owner can read; the file and the admin row are both written or neither, and the
 * start stops when the file cannot be created exclusively (it exists, or is a symlink).
 */
export async function bootstrapAdmin({
  db,
  clock,
  changes,
  config,
  logger,
}: AdminBootstrapDeps): Promise<void> {
  const now = await clock.now();
  const configured = config.adminToken;
  if (configured) {
    const tokenHash = sha256(configured);
    // Nothing to change: no write at all, so a read-only database still starts (and says so on /health).
    const current = await db.read((m) => findOne(m, Principal, { name: ADMIN_NAME }));
    if (
      current &&
      current.tokenHash === tokenHash &&
      current.role === Role.ADMIN &&
      current.revokedAt == null &&
      current.environments == null &&
      current.expiresAt == null
    ) {
      return;
    }
    await db.write(async (m) => {
      const restored = await execute(
        m,
        `UPDATE principals SET token_hash = :tokenHash, role = :role, revoked_at = NULL,
           environments = NULL, expires_at = NULL
         WHERE name = :name
           AND (token_hash <> :tokenHash OR role <> :role OR revoked_at IS NOT NULL
             OR environments IS NOT NULL OR expires_at IS NOT NULL)`,
        { tokenHash, role: Role.ADMIN, name: ADMIN_NAME },
      );
      if (restored) changes.changed(m, ADMIN_NAME);
      else if (!(await exists(m, Principal, { name: ADMIN_NAME }))) {
        await insertRow(m, Principal, {
          name: ADMIN_NAME,
          role: Role.ADMIN,
          tokenHash,
          createdAt: new Date(now),
          revokedAt: null,
          environments: null,
          expiresAt: null,
          oidcIssuer: null,
        });
      }
    });
    if (current && current.tokenHash !== tokenHash) warnReplaced(config.adminTokenFile, logger);
    return;
  }
  if (await db.read((m) => exists(m, Principal, { name: ADMIN_NAME }))) return;
  const path = config.adminTokenFile;
  const token = newToken();
  writeNewSecretFile(path, `${token}\n`);
  try {
    await db.write((m) =>
      insertRow(m, Principal, {
        name: ADMIN_NAME,
        role: Role.ADMIN,
        tokenHash: sha256(token),
        createdAt: new Date(now),
        revokedAt: null,
        environments: null,
        expiresAt: null,
        oidcIssuer: null,
      }),
    );
  } catch (error) {
    rmSync(path, { force: true });
    throw new Error(
      `could not store the admin principal, so the token file ${path} was removed again: ${(error as Error).message}`,
    );
  }
  logger.log(`created the admin token; it is in ${path} (readable by its owner only)`);
}

/** PLANFENCE_ADMIN_TOKEN replaced another stored admin token: say what stopped working. */
function warnReplaced(file: string, logger: LoggerService): void {
  logger.warn(
    existsSync(file)
      ? `PLANFENCE_ADMIN_TOKEN replaced the admin's stored token: the token in ${file} no longer works (use PLANFENCE_ADMIN_TOKEN, or unset it; see docs/operations.md, "The admin token")`
      : 'PLANFENCE_ADMIN_TOKEN replaced the admin\'s stored token: the previous admin token no longer works (see docs/operations.md, "The admin token")',
  );
}

/**
 * Creates `path` with `content`, readable and writable by its owner only (0600). Never
 * follows a symlink and never reuses an existing file: either is an Error naming the path.
 */
export function writeNewSecretFile(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let fd: number;
  try {
    fd = openSync(
      path,
      fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW,
      0o600,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'EEXIST' || code === 'ELOOP'
        ? 'a file or symlink is already there (the admin token of another database in this folder?); it was left untouched. Give this database a token file of its own (PLANFENCE_ADMIN_TOKEN_FILE=PATH) or set PLANFENCE_ADMIN_TOKEN, and start again'
        : (error as Error).message;
    throw new Error(`cannot create the admin token file ${path}: ${why}`);
  }
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, content);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw new Error(`cannot write the admin token file ${path}: ${(error as Error).message}`);
  }
  closeSync(fd);
}
