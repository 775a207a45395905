import { Injectable } from '@nestjs/common';
import { allowsEnvironment } from '../auth/scope.js';
import { Clock } from '../common/clock.js';
import { Database, select } from '../database/database.js';
import { PlansService } from '../plans/plans.service.js';
import { SlackInteractions, type SlackUser } from './slack-interactions.js';
import { SlackLinks } from './slack-links.js';
import { escape } from './slack-message.js';

/** The fields of a slash command's form body that are used here. */
export interface SlashCommand {
  user: SlackUser;
  channelId: string;
  text: string;
  /** The service's address as Slack reached it (for the link). */
  base: string;
}

const HELP =
  'Usage: `/planfence link` (link your Slack user to your planfence person), `/planfence status ENVIRONMENT` (current plan, lease, queue, active deployment).';

/** The link page of the console: opened by a signed-in person, it calls linkSlack(code). */
export function linkUrl(base: string, code: string): string {
  return `${base.replace(/\/+$/, '')}/?slack-link=${encodeURIComponent(code)}`;
}

/**
 * `/planfence link` and `/planfence status ENV`. Every answer goes to the Slack user alone
 * (chat.postEphemeral).
 */
@Injectable()
export class SlackCommands {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly links: SlackLinks,
    private readonly interactions: SlackInteractions,
    private readonly plans: PlansService,
  ) {}

  async run(command: SlashCommand): Promise<void> {
    const [word, ...rest] = command.text.trim().split(/\s+/);
    const answer =
      word === 'link'
        ? await this.link(command)
        : word === 'status' && rest.length === 1
          ? await this.status(command.user, rest[0])
          : HELP;
    await this.interactions.tell(command.channelId, command.user, answer);
  }

  /** R46: a one-time link valid 10 minutes, shown to this Slack user alone. */
  private async link(command: SlashCommand): Promise<string> {
    const code = await this.links.newCode(command.user.teamId, command.user.userId);
    return `Open <${linkUrl(command.base, code)}|this link> in the planfence console, signed in as yourself, within 10 minutes: it links your Slack user to you, once. Share it with no one: whoever opens it would act for your Slack user.`;
  }

  /** The environment as it is: current plan, lease, queue, active deployment. */
  private async status(user: SlackUser, environment: string): Promise<string> {
    const principal = await this.interactions.principalFor(user, null, 'STATUS');
    if (typeof principal === 'string') return principal;
    if (!allowsEnvironment(principal.environments, environment))
      return `Your planfence principal may not act on ${escape(environment)}.`;
    const now = await this.clock.now();
    const read = await this.db.read(async (m) => ({
      env: await select<Record<string, string | number | null>>(
        m,
        `SELECT current_plan_id, lease_holder, lease_generation, lease_expires_at, frozen_reason
         FROM environments WHERE name = :environment`,
        { environment },
      ),
      queue: await select<{ holder: string }>(
        m,
        `SELECT holder FROM lease_tickets WHERE environment = :environment AND status = 'WAITING'
           AND expires_at > :now ORDER BY id`,
        { environment, now },
      ),
      deployment: await select<{ sequence: number | string; plan_id: string; started_by: string }>(
        m,
        `SELECT sequence, plan_id, started_by FROM deployments
         WHERE environment = :environment AND status = 'IN_PROGRESS' ORDER BY sequence DESC`,
        { environment },
      ),
    }));
    const env = read.env[0];
    if (!env) return `There is no environment ${escape(environment)}.`;
    const lines = [`*${escape(environment)}*`];
    const current = env.current_plan_id ? await this.plans.find(String(env.current_plan_id)) : null;
    lines.push(
      current
        ? `Current plan: ${escape(current.id)} ${escape(current.title ?? '')} (published by approval of ${escape(current.reviewedBy ?? 'none')})`
        : 'Current plan: none',
    );
    const leaseLive = env.lease_holder && Number(env.lease_expires_at) > now;
    lines.push(
      leaseLive
        ? `Lease: held by ${escape(String(env.lease_holder))}, generation ${env.lease_generation}, until ${new Date(Number(env.lease_expires_at)).toISOString()}`
        : 'Lease: free',
    );
    lines.push(
      read.queue.length
        ? `Queue: ${read.queue.length} waiting (${read.queue.map((t) => escape(t.holder)).join(', ')})`
        : 'Queue: empty',
    );
    const active = read.deployment[0];
    lines.push(
      active
        ? `Active deployment: #${active.sequence} of ${escape(active.plan_id)} by ${escape(active.started_by)}`
        : 'Active deployment: none',
    );
    if (env.frozen_reason) lines.push(`Frozen: ${escape(String(env.frozen_reason))}`);
    return lines.join('\n');
  }
}
