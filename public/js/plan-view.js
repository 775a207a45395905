// The plan view: opened from the queue or from any plan id on a card (every role may open
// one; only REVIEWER/ADMIN get buttons). A text plan is drawn as a line diff against the
// published plan (the `diff` library, served by the app at /vendor/diff.min.js); a
// Terraform plan (TERRAFORM_PLAN_JSON) by the summary the service computed with every
// sensitive value masked, its content never requested (DESIGN R32); an attribute whose
// sensitive value changes is a row "(sensitive)" → "(sensitive)" (R54). Approve is pinned to
// the content hash shown; the view names that hash, the plan's generation against the
// fence and the lease holder. Every value is put on the page as text.

import { gql } from './api.js';
import { $, el } from './dom.js';
import { showError } from './status.js';
import { canAct, currentUser, isAdmin } from './role.js';
import { countsOf, refreshQueue, required, rulesText } from './queue.js';
import { watchScroll } from './scroll-cue.js';

/** The plan on screen: { plan, env, newest, baseId, hash, blocked } or null. */
let view = null;

const TF_SUMMARY = `summary { add change destroy replace read noop terraformVersion
  resourceChanges { address type actions before after sensitiveChanges }
  provisioners { address type command } }`;

// No `content` here: a Terraform plan is reviewed by its summary (its content, masked as well
// (DESIGN R54), can weigh megabytes).
const PLAN = `query($id: ID!, $e: String!) {
  plan(id: $id) { id environment generation status title contentType contentHash submittedBy submittedAt
    basedOnPlanId rejectionReason expiresAt sourceRevision artifactHash basedOnDeploymentSequence
    ${TF_SUMMARY} approvals { approver at contentHash breakGlassReason person { name email subject } } pendingApprovalRules { group count }
    policyResults { policy effect matched message }
    checks { name status summary detailsUrl reportedBy at } pendingChecks }
  environment(name: $e) { name mode fence lastIssuedGeneration lease { holder generation expiresAt }
    approvalRules { group count } freeze { reason frozenBy }
    currentPlan { id title contentType } }
  plans(environment: $e, first: 1) { id status }
}`;

/** The content of TEXT plans only, for the line diff. */
const CONTENT = 'query($id: ID!) { plan(id: $id) { content } }';

async function sha256(text) {
  if (!globalThis.crypto || !crypto.subtle) return null;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

const isText = (plan) => plan && plan.contentType !== 'TERRAFORM_PLAN_JSON';

/** The plan on screen's environment, or null. */
export function viewedEnvironment() {
  return view ? view.plan.environment : null;
}

export async function openPlan(id) {
  const environment = id.split('@')[0];
  const data = await gql(PLAN, { id, e: environment });
  if (!data.plan) return;
  const base = data.environment.currentPlan;
  view = { plan: data.plan, env: data.environment, newest: data.plans[0], baseId: base ? base.id : null };
  const terraform = !isText(data.plan);
  $('plan-summary').hidden = !terraform;
  $('plan-diff').hidden = terraform;
  if (terraform) {
    // The reviewer reviews the summary the service computed from exactly this content.
    view.hash = data.plan.contentHash;
    view.hashSource = 'the stored hash of the content this summary was computed from';
    drawSummary(data.plan.summary);
    $('plan-base').textContent = 'summary of this Terraform plan';
  } else {
    const content = (await gql(CONTENT, { id })).plan.content;
    const baseContent = base && base.id !== id && isText(base) ? (await gql(CONTENT, { id: base.id })).plan.content : '';
    // The hash pinned by Approve is the hash of the very text drawn on screen.
    const shown = await sha256(content);
    view.hash = shown ?? data.plan.contentHash;
    view.hashSource = shown ? 'SHA-256 of the text shown below' : 'the stored hash (no WebCrypto on this page)';
    drawDiff(baseContent, content);
    $('plan-base').textContent = base ? (base.id === data.plan.id ? `${base.id} (this plan)` : base.id) : 'nothing published yet';
  }
  notice('');
  $('reject-form').hidden = true;
  $('break-glass-form').hidden = true;
  drawView();
  $('plan-view').hidden = false;
  watchScroll($('plan-view'));
  $('plan-view').scrollIntoView({ block: 'start' });
  $('plan-title').focus?.();
}

/** Groups in the order a reviewer must read them: what is lost first. */
const GROUPS = [
  ['replace', 'to replace', (a) => a.length === 2],
  ['destroy', 'to destroy', (a) => a.length === 1 && a[0] === 'delete'],
  ['change', 'to change', (a) => a.length === 1 && a[0] === 'update'],
  ['add', 'to add', (a) => a.length === 1 && a[0] === 'create'],
  ['read', 'to read', (a) => a.length === 1 && a[0] === 'read'],
  ['other', 'other', () => true],
];

/**
 * The attributes that differ between before and after (all of them for a create or a
 * delete). An attribute in `sensitiveChanges` changes though both sides read "(sensitive)"
 * (DESIGN R54): it is a row too, its masked values on both sides.
 */
function attributeRows(before, after, sensitiveChanges = []) {
  const b = before ?? {}, a = after ?? {};
  const secret = new Set(sensitiveChanges);
  const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])].sort();
  const rows = [];
  for (const key of keys) {
    // Terraform leaves out of `after` what is known only after apply.
    const was = JSON.stringify(b[key] ?? null);
    const is = key in a || after == null ? JSON.stringify(a[key] ?? null) : '(known after apply)';
    const hidden = secret.has(key) && was === is;
    if (!hidden && (was === is || (before == null && is === 'null') || (after == null && was === 'null'))) continue;
    const row = el('tr', hidden ? 'sensitive-change' : null, el('td', 'attr', key),
      el('td', 'was', before == null ? '' : was), el('td', 'is', after == null ? '' : is));
    if (hidden) row.title = 'a sensitive value changes';
    rows.push(row);
  }
  return rows;
}

/** Counts first, then the changed resources grouped by action, each with its attribute changes. */
function drawSummary(summary) {
  const out = $('plan-summary');
  out.replaceChildren();
  const head = el('p', 'summary-counts', countsOf(summary));
  if (summary.terraformVersion) head.append(el('span', 'tf-version', ` Terraform ${summary.terraformVersion}`));
  out.append(head);
  // What the apply runs besides the changes: a local-exec command runs on the applier.
  const provisioners = summary.provisioners ?? [];
  if (provisioners.length) {
    const section = el('section', 'group g-provisioners',
      el('h3', null, `${provisioners.length} provisioner${provisioners.length === 1 ? '' : 's'}: commands the apply runs`));
    section.dataset.group = 'provisioners';
    for (const p of provisioners) {
      const item = el('p', `provisioner p-${p.type}`, el('code', null, p.address), ` ${p.type}`);
      if (p.type === 'local-exec') item.append(' (runs on the machine that applies the plan)');
      item.append(el('pre', 'command', p.command ?? '(computed when applied)'));
      section.append(item);
    }
    out.append(section);
  }
  const rest = [...summary.resourceChanges];
  for (const [key, words, matches] of GROUPS) {
    const members = rest.filter((change) => matches(change.actions));
    if (!members.length) continue;
    for (const member of members) rest.splice(rest.indexOf(member), 1);
    const group = el('section', `group g-${key}`, el('h3', null, `${members.length} ${words}`));
    group.dataset.group = key;
    for (const change of members) {
      const item = el('details', 'resource');
      item.open = key !== 'read';
      item.dataset.address = change.address;
      item.append(el('summary', null, el('code', null, change.address), ` ${change.type} · ${change.actions.join(', ')}`));
      const rows = attributeRows(change.before && JSON.parse(change.before), change.after && JSON.parse(change.after),
        change.sensitiveChanges ?? []);
      item.append(rows.length
        ? el('div', 'scroll-x', el('table', 'attrs', el('thead', null, el('tr', null, el('th', null, 'attribute'), el('th', null, 'before'), el('th', null, 'after'))), el('tbody', null, ...rows)))
        : el('p', 'empty', 'no attribute changes known before apply'));
      group.append(item);
    }
    out.append(group);
  }
  if (!summary.resourceChanges.length) out.append(el('p', 'empty', `no changes (${summary.noop} resources unchanged)`));
}

/** One line per <div>: added lines marked +, removed lines marked −, both with a class. */
function drawDiff(published, proposed) {
  const out = $('plan-diff');
  out.replaceChildren();
  for (const part of globalThis.Diff.diffLines(published, proposed)) {
    const kind = part.added ? 'add' : part.removed ? 'del' : 'same';
    const mark = part.added ? '+ ' : part.removed ? '- ' : '  ';
    const lines = part.value.replace(/\n$/, '').split('\n');
    for (const line of lines) out.append(el('div', `line ${kind}`, mark + line));
  }
}

/**
 * The plan's policy results (denied plans are never stored, so none shows here): warnings
 * in amber, required approvals with what is still missing, the rest counted as passed.
 */
function drawPolicies(plan) {
  const out = $('plan-policies');
  out.replaceChildren();
  const matched = plan.policyResults.filter((r) => r.matched);
  for (const r of matched) {
    if (r.effect === 'WARN') out.append(el('div', 'policy policy-warn', `⚠ ${r.policy}: ${r.message ?? ''}`));
    if (r.effect === 'REQUIRE_APPROVAL') {
      const progress = plan.status !== 'PROPOSED' ? '' : plan.pendingApprovalRules.length
        ? ` — still missing ${rulesText(plan.pendingApprovalRules)}` : ' — met';
      out.append(el('div', 'policy policy-approval', `${r.policy}: ${r.message ?? ''}${progress}`));
    }
  }
  const passed = plan.policyResults.length - matched.length;
  if (!plan.policyResults.length) out.append(el('span', 'policy', 'none'));
  else if (passed) out.append(el('div', 'policy policy-passed', `${passed} passed`));
}

/** Only http(s) links are followed from a check's details (DESIGN R50). */
function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
  } catch {
    return null;
  }
}

/**
 * The checks reported on the plan (DESIGN R50): each one's latest result, its summary and a
 * link to its details, and the required checks still waited for. The row is made here, after
 * "still missing", the first time a plan is drawn.
 */
function drawChecks(plan) {
  let out = $('plan-checks');
  if (!out) {
    out = el('dd');
    out.id = 'plan-checks';
    $('plan-missing').after(el('dt', null, 'checks'), out);
  }
  out.replaceChildren();
  for (const check of plan.checks ?? []) {
    const line = el('div', `check check-${check.status}`,
      el('span', `st st-check-${check.status}`, check.status), ` ${check.name}`);
    if (check.summary) line.append(`: ${check.summary}`);
    const href = check.detailsUrl ? safeUrl(check.detailsUrl) : null;
    if (href) {
      const link = el('a', null, 'details');
      link.href = href;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      line.append(' · ', link);
    }
    line.title = `reported by ${check.reportedBy} at ${new Date(check.at).toLocaleString()}`;
    out.append(line);
  }
  const pending = plan.status === 'PROPOSED' ? plan.pendingChecks ?? [] : [];
  if (pending.length) out.append(el('div', 'check check-waiting', `waiting for ${pending.join(', ')}`));
  if (!out.childNodes.length) out.append(el('span', 'check', 'none'));
}

/** Why the plan on screen can no longer be acted on, or null. */
function blockedReason() {
  const { plan, env, newest, baseId } = view;
  if (plan.status === 'OBSOLETE') return 'This plan is OBSOLETE: a newer generation was published or its generation fell behind the fence.';
  if (plan.status === 'EXPIRED') return 'This plan EXPIRED: it waited longer than the environment allows.';
  if (plan.status === 'SUPERSEDED') return 'This plan was SUPERSEDED by a newer publication.';
  if (plan.status === 'REJECTED') return `This plan was REJECTED: ${plan.rejectionReason ?? ''}`;
  if (plan.status === 'PUBLISHED') return 'This plan is PUBLISHED.';
  const current = env.currentPlan ? env.currentPlan.id : null;
  if (current !== baseId) return `A newer plan (${current}) was published while this one was on screen; the diff is out of date. Open it again to review against it.`;
  if (newest && newest.id !== plan.id) return `A newer plan (${newest.id}) was submitted for ${env.name}.`;
  return null;
}

/** "generation 3 · fence 2: above the fence" — whether publishing it still passes the guard. */
function fenceText(plan, env) {
  const g = Number(plan.generation), fence = Number(env.fence);
  const where = g > fence ? 'above the fence' : g === fence ? 'at the fence' : 'below the fence: a publish is refused as stale';
  const ok = g < fence ? 'behind' : 'ok';
  return { text: `generation ${g} · fence ${fence} (${env.mode}): ${where}`, ok };
}

function leaseText(env) {
  const lease = env.lease;
  if (!lease || Date.parse(lease.expiresAt) <= Date.now()) return 'free';
  return `${lease.holder} · generation ${lease.generation} · until ${new Date(lease.expiresAt).toLocaleTimeString()}`;
}

function drawView() {
  const { plan, env } = view;
  const me = currentUser();
  $('plan-title').textContent = plan.title ?? '(untitled plan)';
  $('plan-id').textContent = plan.id;
  $('plan-status').textContent = plan.status;
  $('plan-status').className = `st st-${plan.status}`;
  $('plan-submitted').textContent = `by ${plan.submittedBy} at ${new Date(plan.submittedAt).toLocaleString()}`;
  $('plan-based-on').textContent = [plan.basedOnPlanId,
    plan.basedOnDeploymentSequence != null ? `deployment sequence ${plan.basedOnDeploymentSequence}` : null,
    plan.sourceRevision ? `revision ${plan.sourceRevision}` : null].filter(Boolean).join(' · ') || '—';
  const fence = fenceText(plan, env);
  $('plan-fence').textContent = fence.text;
  $('plan-fence').dataset.fence = fence.ok;
  $('plan-lease').textContent = leaseText(env);
  $('plan-hash').textContent = view.hash ?? '—';
  $('plan-hash').title = view.hashSource ?? '';
  $('plan-hash-source').textContent = view.hashSource ? `(${view.hashSource})` : '';
  // A plan's policies may ask for more approvals than its environment: given + still missing.
  const needed = plan.status === 'PROPOSED'
    ? Math.max(required(env.approvalRules), plan.approvals.length + required(plan.pendingApprovalRules))
    : required(env.approvalRules);
  $('plan-approvals').textContent = `${plan.approvals.length} of ${needed}` +
    (plan.approvals.length ? ` (${plan.approvals.map(approverText).join(', ')})` : '');
  $('plan-missing').textContent = plan.status === 'PROPOSED' ? rulesText(plan.pendingApprovalRules) : '—';
  $('plan-expires').textContent = plan.expiresAt ? new Date(plan.expiresAt).toLocaleString() : 'never';
  drawPolicies(plan);
  drawChecks(plan);
  $('plan-freeze').hidden = !env.freeze;
  $('plan-frozen-badge').hidden = !env.freeze;
  if (env.freeze) $('plan-freeze').textContent = `${env.name} is frozen by ${env.freeze.frozenBy}: ${env.freeze.reason}`;

  const blocked = blockedReason();
  const own = me && plan.submittedBy === me.name;
  view.blocked = blocked;
  $('plan-actions').hidden = !canAct();
  $('approve').hidden = own;
  $('approve').disabled = Boolean(blocked) || Boolean(env.freeze);
  $('reject-open').disabled = Boolean(blocked);
  $('break-glass-open').hidden = !isAdmin() || own;
  $('break-glass-open').disabled = Boolean(blocked);
  if (blocked) {
    $('reject-form').hidden = true;
    $('break-glass-form').hidden = true;
  }
  const reason = blocked ?? (own && canAct() ? 'You submitted this plan: another reviewer approves it.' : null) ??
    (env.freeze && canAct() ? 'Publication is frozen: approve is off; an ADMIN may break glass.' : null);
  $('plan-reason').hidden = !reason;
  $('plan-reason').textContent = reason ?? '';
}

/** Who approved: the person's name and email where the approver signed in (R43), else the principal. */
function approverText(approval) {
  const person = approval.person;
  if (!person) return approval.approver;
  const who = person.name || person.email || person.subject;
  return person.email && person.name ? `${who} <${person.email}>` : who;
}

/** Reads the plan on screen again (its status, approvals, the environment's pointer). */
export async function refreshView() {
  if (!view) return;
  const id = view.plan.id;
  const data = await gql(PLAN, { id, e: view.plan.environment });
  if (!view || view.plan.id !== id || !data.plan) return;
  view.plan = data.plan;
  view.env = data.environment;
  view.newest = data.plans[0];
  drawView();
}

/** A line under the buttons: 'success' (green), 'error' (red) or plain. */
function notice(text, tone = null) {
  const line = $('plan-notice');
  line.textContent = text;
  line.classList.toggle('error', tone === 'error');
  line.classList.toggle('success', tone === 'success');
  line.dataset.tone = tone ?? 'plain';
}

export function failed(error) {
  if (error.code === 'UNAUTHENTICATED') return showError(error);
  notice(`${error.code ?? 'ERROR'}: ${error.message}`, 'error');
}

const APPROVE = `mutation($input: ApprovePlanInput!) { approvePlan(input: $input) {
  id status approvals { approver } pendingApprovalRules { group count } } }`;

/** Approves the plan on screen, pinned to the hash of the content drawn. */
async function sendApproval(breakGlassReason) {
  if (!view) return;
  const input = { planId: view.plan.id, contentHash: view.hash };
  if (breakGlassReason) input.breakGlassReason = breakGlassReason;
  try {
    const plan = (await gql(APPROVE, { input })).approvePlan;
    if (plan.status === 'PUBLISHED') notice(`Published ${plan.id}.`, 'success');
    else notice(`Approval recorded: ${plan.approvals.length} of ${required(view.env.approvalRules)}; still missing ${rulesText(plan.pendingApprovalRules)}.`, 'success');
  } catch (error) {
    failed(error);
  }
  await Promise.all([refreshView(), canAct() ? refreshQueue() : null]).catch(failed);
}

async function sendRejection(reason) {
  try {
    await gql('mutation($input: RejectPlanInput!) { rejectPlan(input: $input) { id status } }',
      { input: { planId: view.plan.id, reason } });
    notice(`Rejected ${view.plan.id}.`);
  } catch (error) {
    failed(error);
  }
  await Promise.all([refreshView(), canAct() ? refreshQueue() : null]).catch(failed);
}

/** The plan view's buttons and forms, and every `.open-plan` on the page. */
export function wirePlanView() {
  document.addEventListener('click', (event) => {
    const opener = event.target.closest && event.target.closest('.open-plan');
    if (opener) openPlan(opener.dataset.plan).catch(failed);
  });
  $('plan-close').addEventListener('click', () => {
    view = null;
    $('plan-view').hidden = true;
  });
  $('approve').addEventListener('click', () => sendApproval());
  $('reject-open').addEventListener('click', () => {
    $('reject-form').hidden = false;
    $('reject-reason').focus();
  });
  $('break-glass-open').addEventListener('click', () => {
    $('break-glass-form').hidden = false;
    $('break-glass-reason').focus();
  });
  $('reject-form').addEventListener('submit', (event) => {
    event.preventDefault();
    $('reject-form').hidden = true;
    sendRejection($('reject-reason').value);
  });
  $('break-glass-form').addEventListener('submit', (event) => {
    event.preventDefault();
    $('break-glass-form').hidden = true;
    sendApproval($('break-glass-reason').value);
  });
}
