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

/** Aliases per request: the service caps root fields per operation (PLANFENCE_MAX_ROOT_FIELDS, 32 by default). */
const FREEZES_PER_REQUEST = 20;

async function freezesBatch(names) {
  const params = names.map((_, i) => `$e${i}: String!`).join(', ');
  const fields = names.map((_, i) => `e${i}: environment(name: $e${i}) { name freeze { reason frozenBy } }`).join(' ');
  const variables = Object.fromEntries(names.map((name, i) => [`e${i}`, name]));
  const data = await gql(`query(${params}) { ${fields} }`, variables);
  return names.map((name, i) => [name, (data[`e${i}`] && data[`e${i}`].freeze) || null]);
}

/**
 * The freezes of the queue's environments, a request per 20 of them: name -> freeze | null.
 * A batch that fails leaves its environments unbadged; the plan view reads the freeze
 * again and keeps Approve off.
 */
async function freezesOf(names) {
  const batches = [];
  for (let i = 0; i < names.length; i += FREEZES_PER_REQUEST) batches.push(names.slice(i, i + FREEZES_PER_REQUEST));
  const answers = await Promise.all(batches.map((batch) => freezesBatch(batch).catch(() => [])));
  return new Map(answers.flat());
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
