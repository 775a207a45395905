// "Turned away" on an environment card: the latest rejected requests, grouped by kind so
// that a stale agent, a missing permission and a deployment refusal are not read as one
// list; every code is shown whole.

import { esc } from './dom.js';

/** Kinds in the order shown, each with the codes it holds (the last one takes the rest). */
export const REJECTION_KINDS = [
  { kind: 'stale', words: 'stale agents and leases', matches: (code) => ['STALE_GENERATION', 'LEASE_NOT_HELD', 'LEASE_HELD', 'EXPIRED'].includes(code) },
  { kind: 'access', words: 'not allowed', matches: (code) => ['FORBIDDEN', 'UNAUTHENTICATED'].includes(code) },
  { kind: 'deployment', words: 'deployments', matches: (code) => String(code).startsWith('DEPLOYMENT_') },
  { kind: 'other', words: 'other refusals', matches: () => true },
];

/** Rejections shown per kind. */
const PER_KIND = 6;

export function kindOf(code) {
  return REJECTION_KINDS.find((k) => k.matches(code)).kind;
}

/** The card's "Turned away" block as HTML (every value escaped). */
export function rejectionsHtml(auditEvents) {
  const rejected = auditEvents.filter((e) => e.outcome === 'REJECTED');
  if (!rejected.length) return '<p class="empty">no rejections</p>';
  return REJECTION_KINDS.map(({ kind, words }) => {
    const members = rejected.filter((e) => kindOf(e.code) === kind);
    if (!members.length) return '';
    // Two cells a row, two lines each: the code (whole) over the time, the request over who sent it.
    const rows = members.slice(0, PER_KIND).map((e) => `<tr>
      <td class="what"><span class="code">${esc(e.code)}</span><br><span class="at">${esc(new Date(e.at).toLocaleTimeString())}</span></td>
      <td class="who"><span class="action">${esc(e.action)}${e.generation != null ? ` g${Number(e.generation)}` : ''}</span><br><span class="actor name" title="${esc(e.actor)}">${esc(e.actor)}</span></td></tr>`).join('');
    const more = members.length > PER_KIND ? ` (latest ${PER_KIND})` : '';
    return `<div class="rejection-group" data-kind="${kind}">
      <h4>${esc(words)} · ${members.length}${more}</h4>
      <table class="rejections">${rows}</table></div>`;
  }).join('');
}
