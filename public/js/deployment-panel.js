// An environment card's deployment block: the freeze, the deployed plan, the active
// deployment (IN_PROGRESS or UNKNOWN) with its heartbeat countdown, and for REVIEWER/ADMIN
// a reconcile form on an UNKNOWN deployment only: a live one is still reporting, and the
// outcome has no default, the reviewer picks what they checked.

import { gql } from './api.js';
import { el, seconds } from './dom.js';
import { canAct } from './role.js';

const OUTCOMES = ['SUCCEEDED', 'FAILED'];

function reconcileForm(d) {
  const form = el('form', 'inline-form reconcile');
  const outcome = el('select', null);
  const prompt = el('option', null, 'choose the outcome…');
  prompt.value = '';
  prompt.disabled = true;
  prompt.selected = true;
  outcome.append(prompt);
  for (const value of OUTCOMES) outcome.append(el('option', null, value));
  outcome.required = true;
  outcome.setAttribute('aria-label', 'outcome');
  const note = el('input', null);
  note.required = true;
  note.placeholder = 'note (what you checked)';
  note.setAttribute('aria-label', 'reconcile note');
  const send = el('button', null, 'Reconcile');
  send.type = 'submit';
  send.disabled = true;
  const result = el('span', 'notice', '');
  outcome.addEventListener('change', () => {
    send.disabled = !OUTCOMES.includes(outcome.value);
  });
  form.append(outcome, note, send, result);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!OUTCOMES.includes(outcome.value)) return;
    gql('mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { id status } }',
      { input: { deploymentId: d.id, outcome: outcome.value, note: note.value } })
      .then((r) => { result.textContent = `${r.reconcileDeployment.id} reconciled ${r.reconcileDeployment.status}`; })
      .catch((error) => { result.textContent = `${error.code ?? 'ERROR'}: ${error.message}`; });
  });
  return form;
}

export function deploymentPanel(env, details) {
  const info = details.environment || {};
  const d = info.activeDeployment;
  const box = el('div', null);
  if (info.freeze) box.append(el('p', 'freeze', `frozen by ${info.freeze.frozenBy}: ${info.freeze.reason}`));
  box.append(el('p', 'deployed', `deployed: ${info.deployedPlan ? info.deployedPlan.id : 'nothing yet'}`));
  if (!d) {
    box.append(el('p', 'empty', 'no deployment in flight'));
    return box;
  }
  const heartbeat = el('span', 'heartbeat', '');
  heartbeat.dataset.expires = d.heartbeatExpiresAt;
  heartbeat.dataset.status = d.status;
  box.append(el('p', `deployment st-${d.status}`, el('strong', null, d.id), ` · ${d.plan.id} · `,
    el('span', 'dstatus', d.status), ` · by ${d.startedBy} · `, heartbeat));
  if (canAct()) {
    box.append(d.status === 'UNKNOWN'
      ? reconcileForm(d)
      : el('p', 'empty reconcile-later', 'in progress: reconcile is offered if its heartbeat lapses (UNKNOWN)'));
  }
  drawHeartbeat(heartbeat);
  return box;
}

export function drawHeartbeat(node) {
  const left = seconds(Date.parse(node.dataset.expires) - Date.now());
  if (node.dataset.status === 'UNKNOWN') node.textContent = 'heartbeat lapsed: outcome UNKNOWN, reconcile it';
  else node.textContent = left > 0 ? `heartbeat due in ${left}s` : `heartbeat lapsed ${-left}s ago: outcome UNKNOWN`;
}

export function tickHeartbeats() {
  document.querySelectorAll('.heartbeat').forEach(drawHeartbeat);
}
