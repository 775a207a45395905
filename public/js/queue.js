// The review queue (REVIEWER, ADMIN): plans waiting for a decision, oldest first. A plan of
// a frozen environment carries a FROZEN badge and opens for viewing, not for review.

import { gql } from './api.js';
import { $, el, seconds, duration } from './dom.js';

const QUEUE = `{ reviewQueue(first: 50) { id environment generation title submittedBy submittedAt expiresAt
  approvals { approver } pendingApprovalRules { group count }
  contentType summary { add change destroy replace read } } }`;

export function rulesText(rules) {
  if (!rules || !rules.length) return 'none';
  return rules.map((r) => `${r.count} from ${r.group ?? 'any approver'}`).join(', ');
}

export function required(rules) {
  return rules.reduce((sum, r) => sum + r.count, 0);
}

/** A Terraform summary's counts as coloured spans: "+1 ~2 −3 ±4" (and reads). */
export function countsOf(summary) {
  const box = el('span', 'counts');
  const parts = [['add', '+', 'to add'], ['change', '~', 'to change'], ['destroy', '−', 'to destroy'],
    ['replace', '±', 'to replace']];
  if (summary.read) parts.push(['read', '↻', 'to read']);
  for (const [key, mark, words] of parts) {
    const part = el('span', `c-${key}${summary[key] ? '' : ' zero'}`, `${mark}${summary[key]}`);
    part.title = `${summary[key]} ${words}`;
    part.dataset.count = key;
    box.append(part, ' ');
  }
  return box;
}

/** The freezes of the queue's environments, one request: name -> { reason, frozenBy } | null. */
async function freezesOf(names) {
  if (!names.length) return new Map();
  const params = names.map((_, i) => `$e${i}: String!`).join(', ');
  const fields = names.map((_, i) => `e${i}: environment(name: $e${i}) { name freeze { reason frozenBy } }`).join(' ');
  const variables = Object.fromEntries(names.map((name, i) => [`e${i}`, name]));
  const data = await gql(`query(${params}) { ${fields} }`, variables);
  return new Map(names.map((name, i) => [name, (data[`e${i}`] && data[`e${i}`].freeze) || null]));
}

export async function refreshQueue() {
  const plans = (await gql(QUEUE)).reviewQueue;
  const freezes = await freezesOf([...new Set(plans.map((p) => p.environment))]);
  const body = $('queue-table').querySelector('tbody');
  body.replaceChildren();
  const now = Date.now();
  for (const plan of plans) {
    const freeze = freezes.get(plan.environment);
    const open = el('button', freeze ? 'open-plan frozen' : 'open-plan', freeze ? 'View (frozen)' : 'Review');
    open.type = 'button';
    open.dataset.plan = plan.id;
    const where = el('td', 'env', plan.environment);
    if (freeze) {
      const badge = el('span', 'badge frozen', 'FROZEN');
      badge.title = `frozen by ${freeze.frozenBy}: ${freeze.reason}`;
      where.append(' ', badge);
    }
    const left = plan.expiresAt ? duration(seconds(Date.parse(plan.expiresAt) - now)) : 'no expiry';
    const cell = (className, label, ...children) => {
      const td = el('td', className, ...children);
      td.dataset.label = label;
      return td;
    };
    where.dataset.label = 'environment';
    const row = el('tr', freeze ? 'frozen' : null,
      where,
      cell('generation', 'generation', String(plan.generation)),
      cell('title', 'title', plan.title ?? '(untitled)'),
      cell('changes', 'changes', plan.summary ? countsOf(plan.summary) : 'text'),
      // A browser clock a little behind the service's shows 0s, not a negative age.
      cell('age', 'age', duration(Math.max(0, seconds(now - Date.parse(plan.submittedAt))))),
      cell('left', 'time left', left),
      cell('approvals', 'approvals', String(plan.approvals.length)),
      cell('missing', 'still missing', rulesText(plan.pendingApprovalRules)),
      cell('open', '', open));
    row.dataset.plan = plan.id;
    if (freeze) row.dataset.frozen = 'true';
    body.append(row);
  }
  $('queue-table').hidden = plans.length === 0;
  $('queue-empty').hidden = plans.length > 0;
}
