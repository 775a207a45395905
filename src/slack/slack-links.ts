import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { Role } from '../common/role.js';
import { Database, execute, select } from '../database/database.js';
import type { Principal } from '../model/principal.entity.js';
import { SlackError } from './slack.errors.js';

/** A one-time link code is good for this long (R46). */
export const LINK_CODE_TTL_MS = 10 * 60_000;

export interface SlackLinkRow {
  teamId: string;
  userId: string;
  principal: string;
  linkedAt: Date;
}

interface Row {
  team_id: string;
  user_id: string;
  principal: string;
  linked_at: number | string;
}

const toLink = (row: Row): SlackLinkRow => ({
  teamId: row.team_id,
  userId: row.user_id,
  principal: row.principal,
  linkedAt: new Date(Number(row.linked_at)),
});

/**
 * R46: a Slack user (team, user) acts only as the principal who opened that user's one-time
 * link. The code is shown once, to that Slack user alone; only its sha256 is stored; it is
 * good for ten minutes and once. Binding it is the only way a link is made.
 */
@Injectable()
export class SlackLinks {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
  ) {}

  /** A new one-time code for (team, user). */
  async newCode(teamId: string, userId: string): Promise<string> {
    const code = randomBytes(24).toString('base64url');
    await this.db.write(async (m) => {
      const now = await this.clock.now(m);
      await execute(
        m,
        `INSERT INTO slack_link_codes (code_hash, team_id, user_id, created_at, expires_at)
         VALUES (:hash, :teamId, :userId, :now, :expires)`,
        { hash: sha256(code), teamId, userId, now, expires: now + LINK_CODE_TTL_MS },
      );
      // Codes long past their time are of no use to anyone.
      await execute(m, 'DELETE FROM slack_link_codes WHERE expires_at < :old', {
        old: now - 24 * 3600_000,
      });
    });
    return code;
  }

  /**
   * Binds the Slack user behind `code` to `principal`, using the code up (one conditional
   * statement: a code used, expired or unknown binds nothing → BAD_USER_INPUT). A Slack user
   * linked before is linked to this principal from now on.
   */
  async link(principal: Principal, code: string): Promise<SlackLinkRow> {
    return this.db.write(async (m) => {
      const now = await this.clock.now(m);
      const hash = sha256(code);
      const used = await execute(
        m,
        `UPDATE slack_link_codes SET used_at = :now
         WHERE code_hash = :hash AND used_at IS NULL AND expires_at > :now`,
        { hash, now },
      );
      if (!used)
        throw new SlackError(
          'BAD_USER_INPUT',
          'this Slack link code is unknown, already used or older than 10 minutes: run /planfence link in Slack again',
        );
      const [code_] = await select<{ team_id: string; user_id: string }>(
        m,
        'SELECT team_id, user_id FROM slack_link_codes WHERE code_hash = :hash',
        { hash },
      );
      await execute(m, 'DELETE FROM slack_links WHERE team_id = :teamId AND user_id = :userId', {
        teamId: code_.team_id,
        userId: code_.user_id,
      });
      await execute(
        m,
        `INSERT INTO slack_links (team_id, user_id, principal, linked_at)
         VALUES (:teamId, :userId, :principal, :now)`,
        { teamId: code_.team_id, userId: code_.user_id, principal: principal.name, now },
      );
      return {
        teamId: code_.team_id,
        userId: code_.user_id,
        principal: principal.name,
        linkedAt: new Date(now),
      };
    });
  }

  /** Ends a link: its principal's own, or any for an ADMIN (else FORBIDDEN). false: no such link. */
  async unlink(principal: Principal, teamId: string, userId: string): Promise<boolean> {
    return this.db.write(async (m) => {
      const [row] = await select<Row>(
        m,
        'SELECT * FROM slack_links WHERE team_id = :teamId AND user_id = :userId',
        { teamId, userId },
      );
      if (!row) return false;
      if (row.principal !== principal.name && principal.role !== Role.ADMIN)
        throw new SlackError(
          'FORBIDDEN',
          'only the linked person or an ADMIN may unlink this Slack user',
        );
      return (
        (await execute(
          m,
          'DELETE FROM slack_links WHERE team_id = :teamId AND user_id = :userId AND principal = :principal',
          { teamId, userId, principal: row.principal },
        )) > 0
      );
    });
  }

  /** The principal (team, user) is linked to; null: none. */
  async principalOf(teamId: string, userId: string): Promise<string | null> {
    const rows = await this.db.read((m) =>
      select<Row>(m, 'SELECT * FROM slack_links WHERE team_id = :teamId AND user_id = :userId', {
        teamId,
        userId,
      }),
    );
    return rows[0]?.principal ?? null;
  }

  linksOf(principal: string): Promise<SlackLinkRow[]> {
    return this.db.read(async (m) =>
      (
        await select<Row>(
          m,
          'SELECT * FROM slack_links WHERE principal = :principal ORDER BY linked_at, team_id, user_id',
          { principal },
        )
      ).map(toLink),
    );
  }
}
