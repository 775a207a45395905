import { Injectable, Logger } from '@nestjs/common';
import { Access } from '../access/access.js';
import { Principal } from '../model/principal.entity.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { Clock } from '../common/clock.js';
import { isDomainError } from '../common/errors.js';
import { sha256 } from '../common/hash.js';
import { PlanId } from '../common/ids.js';
import { throughSlack } from '../common/via.js';
import { Database, execute, select } from '../database/database.js';
import { findOne } from '../database/rows.js';
import { PlanStatus } from '../model/plan.entity.js';
import { PlansResolver } from '../plans/plans.resolver.js';
import { PlansService } from '../plans/plans.service.js';
import { SlackLinks } from './slack-links.js';
import {
  APPROVE_ACTION,
  type Pin,
  parsePin,
  pinValue,
  REASON_BLOCK,
  REASON_INPUT,
  REJECT_ACTION,
  REJECT_CALLBACK,
  rejectModal,
} from './slack-message.js';
import { SlackMessages } from './slack-messages.service.js';

/** Who clicked, as Slack says it (the request's signature vouches for it). */
export interface SlackUser {
  teamId: string;
  userId: string;
}

/** What a click came to: said to the clicker alone (chat.postEphemeral). */
export interface Outcome {
  ok: boolean;
  code: string | null;
  text: string;
}

/** A Slack payload, read through `at`. */
export type Json = Record<string, unknown>;

/** The value at `path` in a parsed payload; undefined where any step is missing. */
export function at(value: unknown, ...path: string[]): unknown {
  let here = value;
  for (const key of path) {
    if (!here || typeof here !== 'object') return undefined;
    here = (here as Record<string, unknown>)[key];
  }
  return here;
}

const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

export const HOW_TO_LINK =
  'Your Slack user is not linked to a planfence person: type `/planfence link` and open the link it shows you in the planfence console while signed in. Until then your clicks change nothing.';

/**
 * R47: a click approves or rejects exactly as approvePlan/rejectPlan do, as the principal
 * the Slack user is linked to (R46), through the same service path (PlansService), with the
 * same checks first (role, environments, as Access applies them to GraphQL), pinned to the
 * plan id, content hash and deployment sequence the message showed. Every refusal is said
 * to the clicker alone and audited (via `slack`); the message is then redrawn as the plan
 * now is. A click is one-shot (R45): the same button of the same user again answers the
 * first outcome.
 */
@Injectable()
export class SlackInteractions {
  private readonly logger = new Logger('SlackInteractions');

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly links: SlackLinks,
    private readonly messages: SlackMessages,
    private readonly plans: PlansService,
    private readonly access: Access,
    private readonly decisions: DecisionRunner,
  ) {}

  /**
   * A `block_actions` payload: Approve decides; Reject opens the modal that asks why. Runs
   * after the request was acknowledged.
   */
  async action(payload: Json): Promise<void> {
    const user = userOf(payload);
    const actions = at(payload, 'actions');
    const action = Array.isArray(actions) ? (actions[0] as Json | undefined) : undefined;
    const channel =
      text(at(payload, 'channel', 'id')) ?? text(at(payload, 'container', 'channel_id'));
    if (!user || !action) return;
    if (action.action_id !== APPROVE_ACTION && action.action_id !== REJECT_ACTION) return;
    const pin = parsePin(action.value);
    if (!pin) return this.tell(channel, user, 'This button is not one planfence made.');
    const principal = await this.principalFor(
      user,
      pin,
      action.action_id === APPROVE_ACTION ? 'APPROVE_PLAN' : 'REJECT_PLAN',
    );
    if (typeof principal === 'string') {
      await this.tell(channel, user, principal);
      await this.messages.redrawSoon(pin.planId);
      return;
    }
    if (action.action_id === REJECT_ACTION) {
      // A role that may not reject is refused (and audited) before it is asked why.
      const { rejectPlan } = PlansResolver.prototype; // eslint-disable-line @typescript-eslint/unbound-method
      if (!this.access.mayCall(principal.role, rejectPlan)) {
        const refused = await this.decide(principal, pin, { kind: 'reject', reason: '' });
        await this.tell(channel, user, refused.text);
        return;
      }
      await this.messages.apiClient().call('views.open', {
        trigger_id: at(payload, 'trigger_id'),
        view: rejectModal(pin, channel),
      });
      return;
    }
    const outcome = await this.once(user, 'approve', pin, () =>
      this.decide(principal, pin, { kind: 'approve' }),
    );
    await this.tell(channel, user, outcome.text);
    await this.messages.redrawSoon(pin.planId);
  }

  /** A `view_submission` of the reject modal: the reason, then the decision. */
  async rejectSubmitted(payload: Json): Promise<void> {
    const user = userOf(payload);
    if (!user || at(payload, 'view', 'callback_id') !== REJECT_CALLBACK) return;
    let meta: { pin?: string; channel?: string | null } = {};
    try {
      meta = JSON.parse(String(at(payload, 'view', 'private_metadata'))) as typeof meta;
    } catch {
      return;
    }
    const pin = parsePin(meta.pin);
    if (!pin) return;
    const channel = meta.channel ?? null;
    const reason = reasonOf(payload) ?? '';
    const principal = await this.principalFor(user, pin, 'REJECT_PLAN');
    if (typeof principal === 'string') return this.tell(channel, user, principal);
    const outcome = await this.once(user, 'reject', pin, () =>
      this.decide(principal, pin, { kind: 'reject', reason }),
    );
    await this.tell(channel, user, outcome.text);
    await this.messages.redrawSoon(pin.planId);
  }

  /**
   * The linked principal, current (not revoked, not expired), or what to tell the clicker
   * (audited: an unlinked click is refused with how to link).
   */
  async principalFor(
    user: SlackUser,
    pin: Pin | null,
    action: string,
  ): Promise<Principal | string> {
    const name = await this.links.principalOf(user.teamId, user.userId);
    const actor = `slack:${user.teamId}/${user.userId}`;
    if (!name) {
      if (pin)
        await this.record(
          pin,
          actor,
          action,
          'UNAUTHENTICATED',
          `Slack user ${user.userId} of team ${user.teamId} is not linked to a planfence principal`,
        );
      return HOW_TO_LINK;
    }
    const { principal, now } = await this.db.read(async (m) => ({
      principal: await findOne(m, Principal, { name }),
      now: await this.clock.now(m),
    }));
    const lapsed =
      !principal ||
      principal.revokedAt !== null ||
      (principal.expiresAt !== null && principal.expiresAt.getTime() <= now);
    if (lapsed) {
      const text = `The planfence principal your Slack user is linked to (${name}) is revoked or expired: nothing was done.`;
      if (pin) await this.record(pin, name, action, 'UNAUTHENTICATED', text);
      return text;
    }
    return principal;
  }

  /** The first outcome of this user's click on this button, deciding it the first time. */
  private async once(
    user: SlackUser,
    kind: string,
    pin: Pin,
    decide: () => Promise<Outcome>,
  ): Promise<Outcome> {
    const key = sha256(`${user.teamId}\n${user.userId}\n${kind}\n${pinValue(pin)}`);
    const taken = await this.db.write(async (m) =>
      execute(
        m,
        `INSERT INTO slack_interactions (key, outcome, at) VALUES (:key, NULL, :now)
         ON CONFLICT (key) DO NOTHING`,
        { key, now: await this.clock.now(m) },
      ),
    );
    if (!taken) {
      const [row] = await this.db.read((m) =>
        select<{ outcome: string | null }>(
          m,
          'SELECT outcome FROM slack_interactions WHERE key = :key',
          { key },
        ),
      );
      if (!row?.outcome)
        return {
          ok: false,
          code: null,
          text: 'Your earlier click on this button is still being decided.',
        };
      const first = JSON.parse(row.outcome) as Outcome;
      return { ...first, text: `You clicked this before: ${first.text}` };
    }
    let outcome: Outcome;
    try {
      outcome = await decide();
    } catch (error) {
      // Not decided (the storage failed): the next click may try again.
      await this.db.write((m) =>
        execute(m, 'DELETE FROM slack_interactions WHERE key = :key', { key }),
      );
      throw error;
    }
    await this.db.write((m) =>
      execute(m, 'UPDATE slack_interactions SET outcome = :outcome WHERE key = :key', {
        key,
        outcome: JSON.stringify(outcome),
      }),
    );
    return outcome;
  }

  /**
   * Approves or rejects as the GraphQL mutation would: role and environments as Access checks
   * them, the deployment sequence pin, then PlansService (contentHash pinned), through the
   * `slack` door. A refusal is an outcome, audited.
   */
  async decide(
    principal: Principal,
    pin: Pin,
    what: { kind: 'approve' } | { kind: 'reject'; reason: string },
  ): Promise<Outcome> {
    // The resolver methods only as Access reads them (their @Roles); never called.
    const { approvePlan, rejectPlan } = PlansResolver.prototype; // eslint-disable-line @typescript-eslint/unbound-method
    const handler = what.kind === 'approve' ? approvePlan : rejectPlan;
    const action = what.kind === 'approve' ? 'APPROVE_PLAN' : 'REJECT_PLAN';
    const request = {};
    try {
      try {
        this.access.checkRole(principal, handler, request);
      } catch (error) {
        if (isDomainError(error))
          await this.record(
            pin,
            principal.name,
            action,
            error.code,
            `role ${principal.role} may not ${what.kind} plans`,
          );
        throw error;
      }
      await this.access.checkScope(
        principal,
        handler.name,
        { input: { planId: pin.planId } },
        'slack',
        request,
      );
      const environment = PlanId.environmentOf(pin.planId);
      const [row] = await this.db.read((m) =>
        select<{ deployment_sequence: number | string }>(
          m,
          'SELECT deployment_sequence FROM environments WHERE name = :name',
          { name: environment },
        ),
      );
      if (row && Number(row.deployment_sequence) !== pin.deploymentSequence) {
        const text = `the message showed deployment sequence ${pin.deploymentSequence}; ${environment} is at ${Number(row.deployment_sequence)} now: a deployment started since. Look at the plan again (the message now shows it as it is).`;
        await this.record(pin, principal.name, action, 'PRECONDITION_FAILED', text);
        return { ok: false, code: 'PRECONDITION_FAILED', text: `Not done: ${text}` };
      }
      const plan = await throughSlack(() =>
        what.kind === 'approve'
          ? this.plans.approve(principal, {
              planId: pin.planId,
              contentHash: pin.contentHash,
              // Decided in the approval's own statement, whatever the read above saw (R47).
              deploymentSequence: pin.deploymentSequence,
            })
          : this.plans.reject(principal, { planId: pin.planId, reason: what.reason }),
      );
      const status = await this.plans.status(plan);
      const text =
        what.kind === 'reject'
          ? `You rejected ${plan.id}.`
          : status === PlanStatus.PUBLISHED
            ? `You approved ${plan.id}: it is published.`
            : `You approved ${plan.id}; it awaits more approvals.`;
      return { ok: true, code: null, text };
    } catch (error) {
      if (!isDomainError(error)) throw error;
      return {
        ok: false,
        code: error.code,
        text: `Not done (${error.code}): ${error.message}. The message now shows the plan as it is.`,
      };
    }
  }

  /** A refusal decided here (not by a decision, which audits itself), in the plan's environment's log. */
  private async record(
    pin: Pin,
    actor: string,
    action: string,
    code: string,
    detail: string,
  ): Promise<void> {
    const environment = PlanId.environmentOf(pin.planId);
    if (!environment) return;
    const decision = {
      environment,
      actor: actor.slice(0, 63),
      action,
      planId: pin.planId,
      generation: PlanId.parse(pin.planId)?.generation ?? null,
      via: 'slack' as const,
    };
    await this.decisions
      .refused(decision, { code, message: detail })
      .catch((error: unknown) =>
        this.logger.warn(`could not audit a Slack refusal: ${(error as Error).message}`),
      );
  }

  /** Says `text` to `user` alone, in `channel` (chat.postEphemeral). */
  async tell(channel: string | null, user: SlackUser, text: string): Promise<void> {
    if (!channel) return;
    await this.messages
      .apiClient()
      .call('chat.postEphemeral', { channel, user: user.userId, text })
      .catch((error: unknown) =>
        this.logger.warn(`chat.postEphemeral to ${user.userId}: ${(error as Error).message}`),
      );
  }
}

export function userOf(payload: Json): SlackUser | null {
  const userId = text(at(payload, 'user', 'id'));
  const teamId = text(at(payload, 'team', 'id')) ?? text(at(payload, 'user', 'team_id'));
  return userId && teamId ? { teamId, userId } : null;
}

/** The reason typed in the reject modal. */
export function reasonOf(payload: Json): string | null {
  const value = text(at(payload, 'view', 'state', 'values', REASON_BLOCK, REASON_INPUT, 'value'));
  return value?.trim() ? value.trim() : null;
}
