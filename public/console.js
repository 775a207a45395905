// planfence reviewer's console, on top of dashboard.js (same global scope: gql, $, token,
// showError). Adapts to the signed-in role (whoami): the review queue and the plan view
// with its line diff against the published plan (the `diff` library, served by the app at
// /vendor/diff.min.js), approve pinned to the content hash shown, reject with a reason,
// break-glass for ADMIN; per environment a timeline (hand-drawn SVG) and the deployment
// panel. Every value is put on the page as text (textContent / text nodes), never as HTML.
// A Terraform plan (TERRAFORM_PLAN_JSON) is shown by its summary, which the service computed
// with every sensitive value masked; its content is never requested (DESIGN R32).
'use strict';

const ACTORS = ['REVIEWER', 'ADMIN'];
/** The signed-in principal: { name, role, groups }. */
let me = null;
/** The plan on screen: { plan, env, baseId, hash, blocked } or null. */
let view = null;

/** Builds an element; children that are not nodes become text nodes (never parsed as HTML). */
function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? '—'));
  return node;
}

const canAct = () => Boolean(me && ACTORS.includes(me.role));
const seconds = (ms) => Math.round(ms / 1000);

function duration(s) {
  const abs = Math.abs(s);
  if (abs < 120) return `${s}s`;
  if (abs < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}

function rulesText(rules) {
  if (!rules || !rules.length) return 'none';
  return rules.map((r) => `${r.count} from ${r.group ?? 'any approver'}`).join(', ');
}

function required(rules) {
  return rules.reduce((sum, r) => sum + r.count, 0);
}

async function consoleStart() {
  me = (await gql('{ whoami { name role groups } }')).whoami;
  $('who').textContent = `${me.name} · ${me.role}`;
  document.body.dataset.role = me.role;
  $('queue').hidden = !canAct();
  if (canAct()) await refreshQueue();
  if (view) await refreshView();
}

// ---- review queue -------------------------------------------------------------------

const QUEUE = `{ reviewQueue(first: 50) { id environment generation title submittedBy submittedAt expiresAt
  approvals { approver } pendingApprovalRules { group count }
  contentType summary { add change destroy replace read } } }`;

/** A Terraform summary's counts as coloured spans: "+1 ~2 −3 ±4" (and reads). */
function countsOf(summary) {
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

async function refreshQueue() {
  const plans = (await gql(QUEUE)).reviewQueue;
  const body = $('queue-table').querySelector('tbody');
  body.replaceChildren();
  const now = Date.now();
  for (const plan of plans) {
    const open = el('button', 'open-plan', 'Review');
    open.type = 'button';
    open.dataset.plan = plan.id;
    const left = plan.expiresAt ? duration(seconds(Date.parse(plan.expiresAt) - now)) : 'no expiry';
    const row = el('tr', null,
      el('td', null, plan.environment),
      el('td', null, String(plan.generation)),
      el('td', null, plan.title ?? '(untitled)'),
      el('td', 'changes', plan.summary ? countsOf(plan.summary) : 'text'),
      el('td', null, duration(seconds(now - Date.parse(plan.submittedAt)))),
      el('td', null, left),
      el('td', 'approvals', String(plan.approvals.length)),
      el('td', 'missing', rulesText(plan.pendingApprovalRules)),
      el('td', null, open));
    row.dataset.plan = plan.id;
    body.append(row);
  }
  $('queue-table').hidden = plans.length === 0;
  $('queue-empty').hidden = plans.length > 0;
}

// ---- plan view ----------------------------------------------------------------------

const TF_SUMMARY = `summary { add change destroy replace read noop terraformVersion
  resourceChanges { address type actions before after } }`;

// No `content` here: a Terraform plan's content holds its sensitive values in clear text.
const PLAN = `query($id: ID!, $e: String!) {
  plan(id: $id) { id environment generation status title contentType contentHash submittedBy submittedAt
    basedOnPlanId rejectionReason expiresAt sourceRevision artifactHash basedOnDeploymentSequence
    ${TF_SUMMARY} approvals { approver at contentHash breakGlassReason } pendingApprovalRules { group count }
    policyResults { policy effect matched message } }
  environment(name: $e) { name approvalRules { group count } freeze { reason frozenBy }
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

async function openPlan(id) {
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
    drawSummary(data.plan.summary);
    $('plan-base').textContent = 'summary of this Terraform plan';
  } else {
    const content = (await gql(CONTENT, { id })).plan.content;
    const baseContent = base && base.id !== id && isText(base) ? (await gql(CONTENT, { id: base.id })).plan.content : '';
    // The hash pinned by Approve is the hash of the very text drawn on screen.
    view.hash = (await sha256(content)) ?? data.plan.contentHash;
    drawDiff(baseContent, content);
    $('plan-base').textContent = base ? (base.id === data.plan.id ? `${base.id} (this plan)` : base.id) : 'nothing published yet';
  }
  $('plan-notice').textContent = '';
  $('reject-form').hidden = true;
  $('break-glass-form').hidden = true;
  drawView();
  $('plan-view').hidden = false;
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

/** The attributes that differ between before and after (all of them for a create or a delete). */
function attributeRows(before, after) {
  const b = before ?? {}, a = after ?? {};
  const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])].sort();
  const rows = [];
  for (const key of keys) {
    // Terraform leaves out of `after` what is known only after apply.
    const was = JSON.stringify(b[key] ?? null);
    const is = key in a || after == null ? JSON.stringify(a[key] ?? null) : '(known after apply)';
    if (was === is || (before == null && is === 'null') || (after == null && was === 'null')) continue;
    rows.push(el('tr', null, el('td', 'attr', key),
      el('td', 'was', before == null ? '' : was), el('td', 'is', after == null ? '' : is)));
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
      const rows = attributeRows(change.before && JSON.parse(change.before), change.after && JSON.parse(change.after));
      item.append(rows.length
        ? el('table', 'attrs', el('thead', null, el('tr', null, el('th', null, 'attribute'), el('th', null, 'before'), el('th', null, 'after'))), el('tbody', null, ...rows))
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
  for (const part of Diff.diffLines(published, proposed)) {
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

function drawView() {
  const { plan, env } = view;
  $('plan-title').textContent = plan.title ?? '(untitled plan)';
  $('plan-id').textContent = plan.id;
  $('plan-status').textContent = plan.status;
  $('plan-status').className = `st st-${plan.status}`;
  $('plan-submitted').textContent = `by ${plan.submittedBy} at ${new Date(plan.submittedAt).toLocaleString()}`;
  $('plan-based-on').textContent = [plan.basedOnPlanId,
    plan.basedOnDeploymentSequence != null ? `deployment sequence ${plan.basedOnDeploymentSequence}` : null,
    plan.sourceRevision ? `revision ${plan.sourceRevision}` : null].filter(Boolean).join(' · ') || '—';
  // A plan's policies may ask for more approvals than its environment: given + still missing.
  const needed = plan.status === 'PROPOSED'
    ? Math.max(required(env.approvalRules), plan.approvals.length + required(plan.pendingApprovalRules))
    : required(env.approvalRules);
  $('plan-approvals').textContent = `${plan.approvals.length} of ${needed}` +
    (plan.approvals.length ? ` (${plan.approvals.map((a) => a.approver).join(', ')})` : '');
  $('plan-missing').textContent = plan.status === 'PROPOSED' ? rulesText(plan.pendingApprovalRules) : '—';
  $('plan-expires').textContent = plan.expiresAt ? new Date(plan.expiresAt).toLocaleString() : 'never';
  drawPolicies(plan);
  $('plan-freeze').hidden = !env.freeze;
  if (env.freeze) $('plan-freeze').textContent = `${env.name} is frozen by ${env.freeze.frozenBy}: ${env.freeze.reason}`;

  const blocked = blockedReason();
  const own = me && plan.submittedBy === me.name;
  view.blocked = blocked;
  $('plan-actions').hidden = !canAct();
  $('approve').hidden = own;
  $('approve').disabled = Boolean(blocked) || Boolean(env.freeze);
  $('reject-open').disabled = Boolean(blocked);
  $('break-glass-open').hidden = !(me && me.role === 'ADMIN') || own;
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

/** Reads the plan on screen again (its status, approvals, the environment's pointer). */
async function refreshView() {
  if (!view) return;
  const id = view.plan.id;
  const data = await gql(PLAN, { id, e: view.plan.environment });
  if (!view || view.plan.id !== id || !data.plan) return;
  view.plan = data.plan;
  view.env = data.environment;
  view.newest = data.plans[0];
  drawView();
}

function notice(text, isError = false) {
  $('plan-notice').textContent = text;
  $('plan-notice').classList.toggle('error', isError);
}

function failed(error) {
  if (error.code === 'UNAUTHENTICATED') return showError(error);
  notice(`${error.code ?? 'ERROR'}: ${error.message}`, true);
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
    notice(plan.status === 'PUBLISHED' ? `Published ${plan.id}.` :
      `Approval recorded: ${plan.approvals.length} of ${required(view.env.approvalRules)}; still missing ${rulesText(plan.pendingApprovalRules)}.`);
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

// ---- live ---------------------------------------------------------------------------

let liveTimer = null;
const liveEnvironments = new Set();

/** Every audit event: the queue and the plan on screen are read again shortly after. */
function consoleActivity(event) {
  liveEnvironments.add(event.environment);
  if (liveTimer) return;
  liveTimer = setTimeout(() => {
    liveTimer = null;
    const touched = view && liveEnvironments.has(view.plan.environment);
    liveEnvironments.clear();
    Promise.all([canAct() ? refreshQueue() : null, touched ? refreshView() : null]).catch(failed);
  }, 120);
}

// ---- per environment: timeline and deployment ---------------------------------------

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text != null) node.textContent = String(text);
  return node;
}

/**
 * Generations over time from the audit log (one slot per event, in order): grants (blue dots), the fence (a step line:
 * the highest generation accepted so far, raised by grants in STRICT), publications
 * (green squares) and rejections (red crosses; a stale agent's sits below the fence).
 */
function timeline(env, details) {
  const events = [...details.auditEvents].reverse().filter((e) => e.generation != null);
  const published = details.plans.filter((p) => p.publishedAt);
  if (!events.length && !published.length) return el('p', 'empty', 'no generations yet');
  // Chronological order, one slot per point: bursts a few milliseconds apart stay readable.
  const points = [...events.map((e) => ({ at: Date.parse(e.at), e })), ...published.map((p) => ({ at: Date.parse(p.publishedAt), p }))]
    .sort((a, b) => a.at - b.at);
  const W = 400, H = 130, L = 30, R = 10, T = 10, B = 20;
  const gMax = Math.max(1, env.fence, env.lastIssuedGeneration, ...events.map((e) => e.generation));
  const x = (i) => L + ((i + 0.5) / points.length) * (W - L - R);
  const y = (g) => H - B - (g / gMax) * (H - T - B);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img' });
  chart.append(svg('title', {}, `${env.name}: generations, fence, publications and rejections over time`));
  chart.append(svg('line', { x1: L, y1: y(0), x2: W - R, y2: y(0), class: 'axis' }));
  chart.append(svg('text', { x: 2, y: y(gMax) + 4, class: 'label' }, `g${gMax}`));
  chart.append(svg('text', { x: 2, y: y(0), class: 'label' }, 'g0'));
  // The fence as a step line.
  let fence = 0;
  let path = `M${L},${y(0)}`;
  points.forEach(({ e }, i) => {
    const raises = e && e.outcome === 'ACCEPTED' && (e.action !== 'ACQUIRE_LEASE' || env.mode === 'STRICT');
    if (raises && e.generation > fence) {
      path += ` H${x(i)} V${y(e.generation)}`;
      fence = e.generation;
    }
  });
  path += ` H${W - R}`;
  chart.append(svg('path', { d: path, class: 'fence-line' }));
  points.forEach(({ e }, i) => {
    if (!e) return;
    const cx = x(i), cy = y(e.generation);
    const label = `${e.actor} ${e.action} generation ${e.generation}${e.code ? ` ${e.code}` : ''}`;
    let mark = null;
    if (e.outcome === 'REJECTED') {
      mark = svg('path', { d: `M${cx - 4},${cy - 4} L${cx + 4},${cy + 4} M${cx - 4},${cy + 4} L${cx + 4},${cy - 4}`, class: 'rejection' });
    } else if (e.action === 'ACQUIRE_LEASE') {
      mark = svg('circle', { cx, cy, r: 3.5, class: 'grant' });
    }
    if (mark) {
      mark.append(svg('title', {}, label));
      chart.append(mark);
    }
  });
  points.forEach(({ p }, i) => {
    if (!p) return;
    const cx = x(i), cy = y(p.generation);
    const mark = svg('rect', { x: cx - 4, y: cy - 4, width: 8, height: 8, class: 'publication' });
    mark.append(svg('title', {}, `published ${p.id}`));
    chart.append(mark);
  });
  const legend = el('p', 'legend',
    el('span', 'k-grant', '● grant'), ' ', el('span', 'k-fence', '— fence'), ' ',
    el('span', 'k-pub', '■ published'), ' ', el('span', 'k-rej', '✕ turned away'));
  return el('div', null, chart, legend);
}

/** The active (IN_PROGRESS/UNKNOWN) deployment with its heartbeat countdown; reconcile for REVIEWER/ADMIN. */
function deploymentPanel(env, details) {
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
    const form = el('form', 'inline-form reconcile');
    const outcome = el('select', null);
    for (const value of ['SUCCEEDED', 'FAILED']) outcome.append(el('option', null, value));
    outcome.setAttribute('aria-label', 'outcome');
    const note = el('input', null);
    note.required = true;
    note.placeholder = 'note (what you checked)';
    note.setAttribute('aria-label', 'reconcile note');
    const send = el('button', null, 'Reconcile');
    send.type = 'submit';
    const result = el('span', 'notice', '');
    form.append(outcome, note, send, result);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      gql('mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { id status } }',
        { input: { deploymentId: d.id, outcome: outcome.value, note: note.value } })
        .then((r) => { result.textContent = `${r.reconcileDeployment.id} reconciled ${r.reconcileDeployment.status}`; })
        .catch((error) => { result.textContent = `${error.code ?? 'ERROR'}: ${error.message}`; });
    });
    box.append(form);
  }
  drawHeartbeat(heartbeat);
  return box;
}

function drawHeartbeat(node) {
  const left = seconds(Date.parse(node.dataset.expires) - Date.now());
  if (node.dataset.status === 'UNKNOWN') node.textContent = 'heartbeat lapsed: outcome UNKNOWN, reconcile it';
  else node.textContent = left > 0 ? `heartbeat due in ${left}s` : `heartbeat lapsed ${-left}s ago: outcome UNKNOWN`;
}

/** Called by dashboard.js after an environment's details were drawn. */
function consoleDetails(item) {
  const section = item.section;
  section.querySelector('.timeline')?.replaceChildren(timeline(item.env, item.details));
  section.querySelector('.deploy')?.replaceChildren(deploymentPanel(item.env, item.details));
}

setInterval(() => document.querySelectorAll('.heartbeat').forEach(drawHeartbeat), 1000);
