// planfence dashboard: plain JavaScript, no dependencies. Reads over GraphQL, stays live
// over the graphql-ws protocol (planPublished and auditEventRecorded per environment).
'use strict';

const TOKEN_KEY = 'planfence.viewerToken';
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '—').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
const state = new Map(); // environment name -> last loaded data
let socket = null;

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function gql(query, variables = {}) {
  const response = await fetch('/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token()}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors && body.errors.length) {
    const error = new Error(body.errors[0].message);
    error.code = body.errors[0].extensions && body.errors[0].extensions.code;
    throw error;
  }
  return body.data;
}

const ENVIRONMENT = `query($e: String!) {
  environment(name: $e) { name mode requireApproval fence lastIssuedGeneration
    lease { holder generation expiresAt }
    currentPlan { id title generation submittedBy reviewedBy publishedAt } }
  plans(environment: $e, first: 6) { id status title submittedBy submittedAt }
  auditEvents(environment: $e, first: 200) { id at actor action generation planId outcome code }
}`;

async function load(name) {
  const data = await gql(ENVIRONMENT, { e: name });
  state.set(name, data);
  render(name);
}

function leaseText(lease) {
  if (!lease) return 'free';
  const left = Math.max(0, Math.round((Date.parse(lease.expiresAt) - Date.now()) / 1000));
  return `${esc(lease.holder)} · generation ${lease.generation} · ${left}s left`;
}

function render(name) {
  const data = state.get(name);
  if (!data || !data.environment) return;
  const env = data.environment;
  let section = document.querySelector(`section[data-env="${CSS.escape(name)}"]`);
  if (!section) {
    section = document.createElement('section');
    section.className = 'env';
    section.dataset.env = name;
    $('environments').append(section);
  }
  const current = env.currentPlan;
  const rejections = data.auditEvents.filter((e) => e.outcome === 'REJECTED').slice(0, 6);
  section.innerHTML = `
    <h2>${esc(env.name)} <span class="mode">${env.mode}${env.requireApproval ? '' : ' · auto-publish'}</span></h2>
    <dl class="facts">
      <dt>fence</dt><dd class="fence">${env.fence}</dd>
      <dt>last generation</dt><dd>${env.lastIssuedGeneration}</dd>
      <dt>lease</dt><dd class="lease">${leaseText(env.lease)}</dd>
    </dl>
    ${current
      ? `<div class="current"><strong class="current-id">${esc(current.id)}</strong> ${esc(current.title)}<br>
         generation ${current.generation} · submitted by ${esc(current.submittedBy)} · ${current.reviewedBy ? `approved by ${esc(current.reviewedBy)}` : "published on submit"}<br>
         published ${when(current.publishedAt)}</div>`
      : '<div class="current none">nothing published yet</div>'}
    <h3>Latest plans</h3>
    ${data.plans.length
      ? `<table class="plans">${data.plans.map((p) => `<tr><td>${esc(p.id)}</td><td class="st st-${p.status}">${p.status}</td><td>${esc(p.title)}</td><td>${esc(p.submittedBy)}</td></tr>`).join('')}</table>`
      : '<p class="empty">no plans yet</p>'}
    <h3>Turned away</h3>
    ${rejections.length
      ? `<table class="rejections">${rejections.map((e) => `<tr><td>${new Date(e.at).toLocaleTimeString()}</td><td>${esc(e.actor)}</td><td>${esc(e.action)} g${e.generation ?? '—'}</td><td class="code">${esc(e.code)}</td></tr>`).join('')}</table>`
      : '<p class="empty">no rejections</p>'}`;
}

const pending = new Map();
function refreshSoon(name) {
  clearTimeout(pending.get(name));
  pending.set(name, setTimeout(() => load(name).catch(showError), 50));
}

function connect(names) {
  if (socket) socket.close();
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
  const ws = new WebSocket(url, 'graphql-transport-ws');
  socket = ws;
  ws.onopen = () => ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token()}` } }));
  ws.onmessage = (message) => {
    const msg = JSON.parse(message.data);
    if (msg.type === 'connection_ack') {
      $('status').textContent = 'live';
      $('status').classList.add('live');
      names.forEach((name, i) => {
        for (const [field, type] of [['planPublished', 'id'], ['auditEventRecorded', 'id']]) {
          ws.send(JSON.stringify({
            id: `${field}-${i}`,
            type: 'subscribe',
            payload: { query: `subscription($e: String!) { ${field}(environment: $e) { ${type} } }`, variables: { e: name } },
          }));
        }
      });
    } else if (msg.type === 'next') {
      refreshSoon(names[Number(msg.id.split('-').pop())]);
    } else if (msg.type === 'ping') {
      ws.send(JSON.stringify({ type: 'pong' }));
    }
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    $('status').textContent = 'reconnecting…';
    $('status').classList.remove('live');
    // Catch up on what happened while disconnected, then listen again.
    setTimeout(() => start().catch(showError), 1000);
  };
}

function showError(error) {
  if (error.code === 'UNAUTHENTICATED') {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(error.message);
  } else {
    $('status').textContent = `error: ${error.message}`;
  }
}

async function start() {
  const { environments } = await gql('{ environments { name } }');
  const names = environments.map((e) => e.name);
  await Promise.all(names.map(load));
  if (!names.length) $('environments').innerHTML = '<p class="empty">no environments yet</p>';
  connect(names);
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
setInterval(() => state.forEach((_, name) => render(name)), 1000); // lease countdowns

if (token()) {
  $('sign-out').hidden = false;
  start().catch(showError);
} else {
  showLogin();
}
