import type { ApprovalRule } from '../environments/policy.model.js';
import type { Approval } from '../plans/approval.model.js';
import { type Plan, PlanStatus } from '../model/plan.entity.js';
import { PolicyEffect, type PolicyResult } from '../policies/plan-policy.model.js';

/** What a message shows of a plan, read together (src/slack/plan-view.ts). */
export interface PlanView {
  /** The plan without its large fields (content, summary, artifact). */
  plan: Plan;
  /** countsInWords of its summary. */
  changes: string | null;
  status: PlanStatus;
  approvals: Approval[];
  pendingRules: ApprovalRule[];
  /** Required checks whose latest result is not SUCCESS (DESIGN R50). */
  pendingChecks: string[];
  /** The environment's deployment sequence when the view was read: the buttons pin it. */
  deploymentSequence: number;
  reviewUrl: string;
}

/** What a button pins (R47): the plan, its content hash and the deployment sequence shown. */
export interface Pin {
  planId: string;
  contentHash: string;
  deploymentSequence: number;
}

export const APPROVE_ACTION = 'planfence_approve';
export const REJECT_ACTION = 'planfence_reject';
export const REJECT_CALLBACK = 'planfence_reject_reason';
export const REASON_BLOCK = 'reason';
export const REASON_INPUT = 'reason_input';

/** Statuses after which nothing more can happen to the plan: the message is final. */
export const FINAL_STATUSES: readonly PlanStatus[] = [
  PlanStatus.SUPERSEDED,
  PlanStatus.OBSOLETE,
  PlanStatus.REJECTED,
  PlanStatus.EXPIRED,
];

export function pinValue(pin: Pin): string {
  return JSON.stringify({ p: pin.planId, h: pin.contentHash, d: pin.deploymentSequence });
}

/** The pin a button's value carries; null when it is not one this service made. */
export function parsePin(value: unknown): Pin | null {
  if (typeof value !== 'string' || value.length > 2000) return null;
  try {
    const { p, h, d } = JSON.parse(value) as Record<string, unknown>;
    if (typeof p !== 'string' || typeof h !== 'string' || typeof d !== 'number') return null;
    return { planId: p, contentHash: h, deploymentSequence: d };
  } catch {
    return null;
  }
}

interface Counts {
  add: number;
  change: number;
  destroy: number;
  replace: number;
}

/** Summary counts in words, destroys and replacements first; null for a TEXT plan. */
export function countsInWords(summary: string | null): string | null {
  if (!summary) return null;
  const counts = JSON.parse(summary) as Counts;
  const parts = [
    [counts.destroy, 'to destroy'],
    [counts.replace, 'to replace'],
    [counts.add, 'to add'],
    [counts.change, 'to change'],
  ] as const;
  const words = parts.map(([n, what]) => `${n} ${what}`).join(', ');
  return counts.destroy > 0 || counts.replace > 0 ? `:warning: ${words}` : words;
}

const STATUS_WORDS: Record<PlanStatus, string> = {
  PROPOSED: ':hourglass_flowing_sand: Awaiting review',
  PUBLISHED: ':white_check_mark: Published',
  SUPERSEDED: ':arrow_heading_up: Superseded by a later plan',
  OBSOLETE: ':no_entry_sign: Obsolete: a later lease or plan overtook it',
  REJECTED: ':x: Rejected',
  EXPIRED: ':hourglass: Expired before it was approved',
};

/** Slack mrkdwn: &, < and > escaped (the rest is shown as written). */
export function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * The Block Kit message of a plan (DESIGN §20): title, environment, generation, summary
 * counts, policy warnings, pending approvals, the console link, and while the plan awaits
 * review the Approve and Reject buttons, whose values pin what the message shows.
 */
export function renderMessage(view: PlanView): { text: string; blocks: unknown[] } {
  const { plan, status } = view;
  const title = plan.title ?? '(untitled plan)';
  const text = `${plan.environment}: ${title} — ${STATUS_WORDS[status].replace(/^:[a-z_]+: /, '')}`;
  const fields = [
    `*Environment*\n${escape(plan.environment)}`,
    `*Generation*\n${plan.generation} (plan ${escape(plan.id)})`,
    `*Submitted by*\n${escape(plan.submittedBy)}`,
    `*Status*\n${STATUS_WORDS[status]}`,
  ];
  const blocks: unknown[] = [
    { type: 'header', text: { type: 'plain_text', text: title.slice(0, 150), emoji: false } },
    { type: 'section', fields: fields.map((f) => ({ type: 'mrkdwn', text: f })) },
  ];
  const counts = view.changes;
  blocks.push({
    type: 'section',
    text: { type: 'mrkdwn', text: `*Changes*: ${counts ?? 'a text plan (no Terraform summary)'}` },
  });
  const warnings = (plan.policyResults ?? []).filter(
    (r: PolicyResult) => r.matched && r.effect === PolicyEffect.WARN,
  );
  if (warnings.length)
    blocks.push({
      type: 'section',
      text: {
        type: 'mrkdwn',
        text: `*Policy warnings*\n${warnings.map((w) => `:warning: ${escape(w.policy)}${w.message ? `: ${escape(w.message)}` : ''}`).join('\n')}`,
      },
    });
  const approvals = view.approvals.map((a) => escape(a.approver)).join(', ') || 'none yet';
  const lines = [`*Approvals*: ${approvals}`];
  if (status === PlanStatus.PROPOSED) {
    const pending = view.pendingRules
      .map((r) => `${r.count} more${r.group ? ` from ${escape(r.group)}` : ''}`)
      .join(', ');
    lines.push(`*Pending approvals*: ${pending || 'none: the next approval publishes'}`);
    if (view.pendingChecks.length)
      lines.push(`*Pending checks*: ${view.pendingChecks.map(escape).join(', ')}`);
  }
  if (status === PlanStatus.REJECTED)
    lines.push(
      `*Rejected by* ${escape(plan.reviewedBy ?? '?')}: ${escape(plan.rejectionReason ?? '')}`,
    );
  if (status === PlanStatus.PUBLISHED && plan.reviewedBy)
    lines.push(`*Published* after ${escape(plan.reviewedBy)}'s approval`);
  blocks.push({ type: 'section', text: { type: 'mrkdwn', text: lines.join('\n') } });
  const elements: unknown[] = [
    {
      type: 'button',
      action_id: 'planfence_review',
      text: { type: 'plain_text', text: 'Review in console' },
      url: view.reviewUrl,
    },
  ];
  if (status === PlanStatus.PROPOSED) {
    const value = pinValue({
      planId: plan.id,
      contentHash: plan.contentHash,
      deploymentSequence: view.deploymentSequence,
    });
    elements.push(
      {
        type: 'button',
        action_id: APPROVE_ACTION,
        style: 'primary',
        text: { type: 'plain_text', text: 'Approve' },
        value,
      },
      {
        type: 'button',
        action_id: REJECT_ACTION,
        style: 'danger',
        text: { type: 'plain_text', text: 'Reject' },
        value,
      },
    );
  }
  blocks.push({ type: 'actions', block_id: 'planfence_actions', elements });
  blocks.push({
    type: 'context',
    elements: [
      {
        type: 'mrkdwn',
        text: `content sha256 \`${plan.contentHash.slice(0, 12)}\` · deployment sequence ${view.deploymentSequence}`,
      },
    ],
  });
  return { text, blocks };
}

/** The modal that asks a reviewer why they reject; its private metadata carries the pin. */
export function rejectModal(pin: Pin, channel: string | null): Record<string, unknown> {
  return {
    type: 'modal',
    callback_id: REJECT_CALLBACK,
    private_metadata: JSON.stringify({ pin: pinValue(pin), channel }),
    title: { type: 'plain_text', text: 'Reject plan' },
    submit: { type: 'plain_text', text: 'Reject' },
    close: { type: 'plain_text', text: 'Cancel' },
    blocks: [
      {
        type: 'section',
        text: { type: 'mrkdwn', text: `Rejecting plan *${escape(pin.planId)}*.` },
      },
      {
        type: 'input',
        block_id: REASON_BLOCK,
        label: { type: 'plain_text', text: 'Reason' },
        element: { type: 'plain_text_input', action_id: REASON_INPUT, multiline: true },
      },
    ],
  };
}
