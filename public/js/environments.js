// The environment cards: every environment from one paged `environments` request, the
// details (latest plans, lease queue, rejections, timeline, deployment) of the cards on
// screen, and the refresh of the environments an activity event names.

import { gql } from './api.js';
import { $, esc, when } from './dom.js';
import { showError } from './status.js';
import { rejectionsHtml } from './rejections.js';
import { timeline } from './timeline.js';
import { deploymentPanel } from './deployment-panel.js';
import { watchScroll } from './scroll-cue.js';

/** Environments per `environments` request; halved when the server refuses a page as too costly. */
const PAGE = 10000;
const MIN_PAGE = 100;
/** More environments changed at once than this: reload the list instead of each of them. */
const MAX_SINGLE_REFRESHES = 10;

/** environment name -> { env, details: { plans, auditEvents, ... } | null, freeze, section } */
const state = new Map();
const visible = new Set();
let generation = 0; // bumps on every (re)start: late answers of an older start are dropped

/** Starts a new load: answers to requests of an earlier one are dropped from now on. */
export function nextGeneration() {
  return ++generation;
}

export function currentGeneration() {
  return generation;
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
export async function loadAll() {
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

const nameHtml = (name) => `<span class="name" title="${esc(name)}">${esc(name)}</span>`;

function summaryHtml(env, freeze) {
  const current = env.currentPlan;
  const frozen = freeze ? ` <span class="badge frozen" title="frozen by ${esc(freeze.frozenBy)}: ${esc(freeze.reason)}">FROZEN</span>` : '';
  return `
    <h2><span class="env-name">${esc(env.name)}${frozen}</span> <span class="mode">${esc(env.mode)}${env.requireApproval ? '' : ' · auto-publish'}</span></h2>
    ${freeze ? `<p class="freeze card-freeze">frozen by ${esc(freeze.frozenBy)}: ${esc(freeze.reason)}</p>` : ''}
    <dl class="facts">
      <dt>fence</dt><dd class="fence">${Number(env.fence)}</dd>
      <dt>last generation</dt><dd>${Number(env.lastIssuedGeneration)}</dd>
      <dt>lease</dt><dd class="lease">${leaseText(env.lease)}</dd>
      <dt>queue</dt><dd class="queue-mode">${esc(env.queueMode)}</dd>
    </dl>
    ${current
      ? `<div class="current"><strong class="current-id">${esc(current.id)}</strong> ${esc(current.title)}<br>
         generation ${Number(current.generation)} · submitted by ${nameHtml(current.submittedBy)} · ${current.reviewedBy ? `approved by ${nameHtml(current.reviewedBy)}` : 'published on submit'}<br>
         published ${esc(when(current.publishedAt))}</div>`
      : '<div class="current none">nothing published yet</div>'}`;
}

function detailsHtml(details) {
  if (!details) return '<p class="empty loading">…</p>';
  return `
    <h3>Latest plans</h3>
    ${details.plans.length
      ? `<div class="scroll-x"><table class="plans">${details.plans.map((p) => `<tr><td><button type="button" class="open-plan link" data-plan="${esc(p.id)}">${esc(p.id)}</button></td><td class="st st-${esc(p.status)}">${esc(p.status)}</td><td class="title">${esc(p.title)}</td><td class="submitter">${nameHtml(p.submittedBy)}</td></tr>`).join('')}</table></div>`
      : '<p class="empty">no plans yet</p>'}
    <h3>Waiting for the lease</h3>
    ${details.leaseQueue && details.leaseQueue.length
      ? `<ol class="lease-queue">${details.leaseQueue.map((t) => `<li>${esc(t.holder)} <span class="since">since ${esc(when(t.enqueuedAt))}</span></li>`).join('')}</ol>`
      : '<p class="empty">nobody waits</p>'}
    <h3>Turned away</h3>
    <div class="turned-away">${rejectionsHtml(details.auditEvents)}</div>
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

function drawSummary(item) {
  item.section.querySelector('.summary').innerHTML = summaryHtml(item.env, item.freeze);
  item.section.classList.toggle('frozen', Boolean(item.freeze));
}

/** Stores an environment's summary and draws it (a new environment gets its section in name order). */
export function putSummary(env, bulk = false) {
  let item = state.get(env.name);
  if (!item) {
    item = { env, details: null, freeze: null, section: sectionFor(env.name) };
    state.set(env.name, item);
    const next = bulk ? null : [...state.keys()].sort().find((n) => n > env.name && state.get(n).section.isConnected);
    $('environments').insertBefore(item.section, next ? state.get(next).section : null);
    $('empty')?.remove();
  }
  item.env = env;
  drawSummary(item);
  if (!item.section.querySelector('.details').innerHTML) item.section.querySelector('.details').innerHTML = detailsHtml(item.details);
}

function drawDetails(item) {
  const section = item.section;
  section.querySelector('.details').innerHTML = detailsHtml(item.details);
  section.querySelector('.timeline')?.replaceChildren(timeline(item.env, item.details));
  section.querySelector('.deploy')?.replaceChildren(deploymentPanel(item.env, item.details));
  watchScroll(section);
}

async function refreshDetails(name) {
  const mine = generation;
  const details = await gql(DETAILS, { e: name }).catch(showError);
  const item = state.get(name);
  if (!details || !item || mine !== generation) return;
  item.details = details;
  item.freeze = (details.environment && details.environment.freeze) || null;
  drawSummary(item);
  drawDetails(item);
}

function forgetDetails(item) {
  item.details = null;
  item.section.querySelector('.details').innerHTML = detailsHtml(null);
}

/** Draws the whole list (the server's name order) and reloads the details of the cards on screen. */
export function showAll(environments) {
  environments.forEach((env) => putSummary(env, true));
  const main = $('environments');
  if (environments.some((env, i) => main.children[i] !== state.get(env.name).section)) {
    environments.forEach((env) => main.append(state.get(env.name).section));
  }
  for (const item of state.values()) forgetDetails(item);
  [...visible].forEach(refreshDetails);
  if (!environments.length && !$('empty')) {
    main.insertAdjacentHTML('beforeend', '<p id="empty" class="empty">no environments yet</p>');
  }
}

/** Environments with events not yet shown; refreshed together shortly after the first one. */
const dirty = new Set();
let flushTimer = null;

export function markDirty(name) {
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
  names.filter((name) => !visible.has(name) && state.has(name)).forEach((name) => forgetDetails(state.get(name)));
}

/** Lease countdowns: only the leases of environments on screen are redrawn. */
export function tickLeases() {
  for (const name of visible) {
    const item = state.get(name);
    if (item && item.env.lease) item.section.querySelector('.lease').innerHTML = leaseText(item.env.lease);
  }
}
