// planfence dashboard: plain JavaScript, no dependencies, no inline script. Loads every
// environment with one paged `environments` request, loads the latest plans and
// rejections of the environments on screen, and stays live over graphql-ws with one
// subscription (activityRecorded) whatever the number of environments.
'use strict';

const TOKEN_KEY = 'planfence.token';
/** Environments per `environments` request; halved when the server refuses a page as too costly. */
const PAGE = 10000;
const MIN_PAGE = 100;
/** More environments changed at once than this: reload the list instead of each of them. */
const MAX_SINGLE_REFRESHES = 10;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '—').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/** environment name -> { env, details: { plans, auditEvents } | null, section } */
const state = new Map();
const visible = new Set();
let socket = null;
let generation = 0; // bumps on every (re)start: late answers of an older start are dropped

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function gql(query, variables = {}) {
  const response = await fetch('/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token()}` },
    body: JSON.stringify({ query, variables }),
  });
  let body;
  try {
    body = await response.json();
  } catch {
    throw Object.assign(new Error(`HTTP ${response.status}`), { code: `HTTP_${response.status}` });
  }
  if (body.errors && body.errors.length) {
    const error = new Error(body.errors[0].message);
    error.code = body.errors[0].extensions && body.errors[0].extensions.code;
    throw error;
  }
  return body.data;
}

const SUMMARY = `name mode requireApproval fence lastIssuedGeneration queueMode
  lease { holder generation expiresAt }
  currentPlan { id title generation submittedBy reviewedBy publishedAt }`;
const LIST = `query($first: Int, $after: String) { environments(first: $first, after: $after) { ${SUMMARY} } }`;
const ONE = `query($e: String!) { environment(name: $e) { ${SUMMARY} } }`;
const DETAILS = `query($e: String!) {
  plans(environment: $e, first: 6) { id status title submittedBy submittedAt generation publishedAt }
  auditEvents(environment: $e, first: 200) { id at actor action generation planId outcome code }
  leaseQueue(environment: $e) { id holder position enqueuedAt }
  environment(name: $e) { freeze { reason frozenBy } activeDeployment { id sequence status startedBy heartbeatExpiresAt plan { id } } deployedPlan { id } }
}`;

/** Every environment, in name order, one page per request (one request up to PAGE environments). */
async function loadAll() {
  const all = [];
  let first = PAGE;
  let after = null;
  for (;;) {
    let page;
    try {
      page = (await gql(LIST, { first, after })).environments;
    } catch (error) {
      if (error.code !== 'BAD_USER_INPUT' || first <= MIN_PAGE) throw error;
      first = Math.max(MIN_PAGE, Math.floor(first / 2));
      continue;
    }
    all.push(...page);
    if (page.length < first) return all;
    after = page[page.length - 1].name;
  }
}

function leaseText(lease) {
  if (!lease) return 'free';
  const left = Math.max(0, Math.round((Date.parse(lease.expiresAt) - Date.now()) / 1000));
  if (left === 0) return 'free';
  return `${esc(lease.holder)} · generation ${lease.generation} · ${left}s left`;
}

function summaryHtml(env) {
  const current = env.currentPlan;
  return `
    <h2>${esc(env.name)} <span class="mode">${esc(env.mode)}${env.requireApproval ? '' : ' · auto-publish'}</span></h2>
    <dl class="facts">
      <dt>fence</dt><dd class="fence">${Number(env.fence)}</dd>
      <dt>last generation</dt><dd>${Number(env.lastIssuedGeneration)}</dd>
      <dt>lease</dt><dd class="lease">${leaseText(env.lease)}</dd>
      <dt>queue</dt><dd class="queue-mode">${esc(env.queueMode)}</dd>
    </dl>
    ${current
      ? `<div class="current"><strong class="current-id">${esc(current.id)}</strong> ${esc(current.title)}<br>
         generation ${Number(current.generation)} · submitted by ${esc(current.submittedBy)} · ${current.reviewedBy ? `approved by ${esc(current.reviewedBy)}` : 'published on submit'}<br>
         published ${esc(when(current.publishedAt))}</div>`
      : '<div class="current none">nothing published yet</div>'}`;
}

function detailsHtml(details) {
  if (!details) return '<p class="empty loading">…</p>';
  const rejections = details.auditEvents.filter((e) => e.outcome === 'REJECTED').slice(0, 6);
  return `
    <h3>Latest plans</h3>
    ${details.plans.length
      ? `<table class="plans">${details.plans.map((p) => `<tr><td><button type="button" class="open-plan link" data-plan="${esc(p.id)}">${esc(p.id)}</button></td><td class="st st-${esc(p.status)}">${esc(p.status)}</td><td>${esc(p.title)}</td><td>${esc(p.submittedBy)}</td></tr>`).join('')}</table>`
      : '<p class="empty">no plans yet</p>'}
    <h3>Waiting for the lease</h3>
    ${details.leaseQueue && details.leaseQueue.length
      ? `<ol class="lease-queue">${details.leaseQueue.map((t) => `<li>${esc(t.holder)} <span class="since">since ${esc(when(t.enqueuedAt))}</span></li>`).join('')}</ol>`
      : '<p class="empty">nobody waits</p>'}
    <h3>Turned away</h3>
    ${rejections.length
      ? `<table class="rejections">${rejections.map((e) => `<tr><td>${esc(new Date(e.at).toLocaleTimeString())}</td><td>${esc(e.actor)}</td><td>${esc(e.action)} g${esc(e.generation)}</td><td class="code">${esc(e.code)}</td></tr>`).join('')}</table>`
      : '<p class="empty">no rejections</p>'}
    <h3>Timeline</h3><div class="timeline"></div>
    <h3>Deployment</h3><div class="deploy"></div>`;
}

const observer = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const name = entry.target.dataset.env;
    if (entry.isIntersecting) {
      visible.add(name);
      const item = state.get(name);
      if (item && !item.details) refreshDetails(name);
    } else {
      visible.delete(name);
    }
  }
});

function sectionFor(name) {
  const section = document.createElement('section');
  section.className = 'env';
  section.dataset.env = name;
  section.innerHTML = '<div class="summary"></div><div class="details"></div>';
  observer.observe(section);
  return section;
}

/** Stores an environment's summary and draws it (a new environment gets its section in name order). */
function putSummary(env, bulk = false) {
  let item = state.get(env.name);
  if (!item) {
    item = { env, details: null, section: sectionFor(env.name) };
    state.set(env.name, item);
    const next = bulk ? null : [...state.keys()].sort().find((n) => n > env.name && state.get(n).section.isConnected);
    $('environments').insertBefore(item.section, next ? state.get(next).section : null);
    $('empty')?.remove();
  }
  item.env = env;
  item.section.querySelector('.summary').innerHTML = summaryHtml(env);
  if (!item.section.querySelector('.details').innerHTML) item.section.querySelector('.details').innerHTML = detailsHtml(item.details);
}

async function refreshDetails(name) {
  const mine = generation;
  const details = await gql(DETAILS, { e: name }).catch(showError);
  const item = state.get(name);
  if (!details || !item || mine !== generation) return;
  item.details = details;
  item.section.querySelector('.details').innerHTML = detailsHtml(details);
  consoleDetails(item);
}

/** Environments with events not yet shown; refreshed together shortly after the first one. */
const dirty = new Set();
let flushTimer = null;

function markDirty(name) {
  dirty.add(name);
  if (!flushTimer) flushTimer = setTimeout(() => flush().catch(showError), 100);
}

async function flush() {
  flushTimer = null;
  const names = [...dirty];
  dirty.clear();
  const mine = generation;
  if (names.length > MAX_SINGLE_REFRESHES) {
    const all = await loadAll();
    if (mine !== generation) return;
    all.forEach((env) => putSummary(env));
  } else {
    await Promise.all(names.map(async (name) => {
      const { environment } = await gql(ONE, { e: name });
      if (environment && mine === generation) putSummary(environment);
    }));
  }
  await Promise.all(names.filter((name) => visible.has(name)).map(refreshDetails));
  // Off-screen environments load their details again when they come into view.
  names.filter((name) => !visible.has(name) && state.has(name)).forEach((name) => {
    state.get(name).details = null;
    state.get(name).section.querySelector('.details').innerHTML = detailsHtml(null);
  });
}

const ACTIVITY = 'subscription { activityRecorded { id environment action outcome planId generation } }';

/**
 * Opens the activity subscription; resolves once it is asked for (or the socket failed), so
 * that a load started afterwards misses no event: what happens during the load arrives as an
 * event too, and refreshing twice is harmless.
 */
function connect() {
  if (socket) socket.close();
  let subscribed;
  const asked = new Promise((resolve) => {
    subscribed = resolve;
  });
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
  const ws = new WebSocket(url, 'graphql-transport-ws');
  socket = ws;
  ws.addEventListener('open', () =>
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token()}` } })));
  ws.addEventListener('message', (message) => {
    const msg = JSON.parse(message.data);
    if (msg.type === 'connection_ack') {
      ws.send(JSON.stringify({ id: 'activity', type: 'subscribe', payload: { query: ACTIVITY } }));
      $('status').textContent = 'live';
      $('status').classList.add('live');
      subscribed();
    } else if (msg.type === 'next') {
      const event = msg.payload && msg.payload.data && msg.payload.data.activityRecorded;
      if (event) {
        markDirty(event.environment);
        consoleActivity(event);
      }
    } else if (msg.type === 'error') {
      $('status').textContent = `error: ${(msg.payload && msg.payload[0] && msg.payload[0].message) || 'subscription refused'}`;
      $('status').classList.remove('live');
    } else if (msg.type === 'ping') {
      ws.send(JSON.stringify({ type: 'pong' }));
    }
  });
  ws.addEventListener('close', () => {
    subscribed();
    if (socket !== ws) return;
    $('status').textContent = 'reconnecting…';
    $('status').classList.remove('live');
    // Catch up on what happened while disconnected, then listen again.
    setTimeout(() => start().catch(showError), 1000);
  });
  return asked;
}

function showError(error) {
  if (error.code === 'UNAUTHENTICATED') {
    sessionStorage.removeItem(TOKEN_KEY);
    if (socket) {
      const ws = socket;
      socket = null;
      ws.close();
    }
    showLogin(error.message);
  } else {
    $('status').textContent = `error: ${error.message}`;
  }
}

async function start() {
  const mine = ++generation;
  await connect();
  if (mine !== generation) return;
  const environments = await loadAll();
  if (mine !== generation) return;
  environments.forEach((env) => putSummary(env, true));
  // The list's order is the server's name order.
  const main = $('environments');
  if (environments.some((env, i) => main.children[i] !== state.get(env.name).section)) {
    environments.forEach((env) => main.append(state.get(env.name).section));
  }
  for (const item of state.values()) {
    item.details = null;
    item.section.querySelector('.details').innerHTML = detailsHtml(null);
  }
  [...visible].forEach(refreshDetails);
  consoleStart().catch(showError);
  if (!environments.length && !$('empty')) {
    $('environments').insertAdjacentHTML('beforeend', '<p id="empty" class="empty">no environments yet</p>');
  }
}

function showLogin(message = '') {
  $('login').hidden = false;
  $('sign-out').hidden = true;
  $('login-error').textContent = message;
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
  $('login').hidden = true;
  $('sign-out').hidden = false;
  start().catch(showError);
});
$('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});
// Lease countdowns: only the leases of environments on screen are redrawn.
setInterval(() => {
  for (const name of visible) {
    const item = state.get(name);
    if (item && item.env.lease) item.section.querySelector('.lease').innerHTML = leaseText(item.env.lease);
  }
}, 1000);

if (token()) {
  $('sign-out').hidden = false;
  start().catch(showError);
} else {
  showLogin();
}
