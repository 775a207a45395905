// planfence dashboard and reviewer's console: plain ES modules, no dependencies but the
// served `diff` library, no inline script. Signs in, subscribes before it loads (so that
// no event during the load is missed), draws every environment and, for REVIEWER/ADMIN,
// the review queue; activity events refresh what they touch. A review link (`/?plan=<id>`,
// the reviewUrl an agent is given) opens that plan once the console has started.

import { gql, forgetToken, setToken, signInProviders, token, useSession, usingSession } from './api.js';
import { $ } from './dom.js';
import { onUnauthenticated, setStatus, showError } from './status.js';
import { canAct, setMe } from './role.js';
import { connect, disconnect, listening } from './subscription.js';
import { currentGeneration, loadAll, markDirty, nextGeneration, showAll, tickLeases } from './environments.js';
import { refreshQueue } from './queue.js';
import { failed, openPlan, refreshView, viewedEnvironment, wirePlanView } from './plan-view.js';
import { tickHeartbeats } from './deployment-panel.js';
import { offerSlackLink } from './slack-link.js';

function showLogin(message = '') {
  $('login').hidden = false;
  $('sign-out').hidden = true;
  $('log-out').hidden = true;
  $('login-error').textContent = message;
}

/** "Sign in with …" for each provider the service offers (DESIGN §19); back to this page afterwards. */
async function showProviders() {
  const providers = await signInProviders();
  const list = $('sign-in-providers');
  list.replaceChildren();
  const back = `${location.pathname}${location.search}`;
  for (const provider of providers) {
    const link = document.createElement('a');
    link.className = 'sign-in-provider';
    link.href = `${provider.url}&return=${encodeURIComponent(back)}`;
    link.textContent = `Sign in with ${provider.label}`;
    list.append(link);
  }
  list.hidden = providers.length === 0;
  $('token-hint').textContent = providers.length
    ? 'Or paste a token (break-glass, local use):'
    : '';
}

/** The session cookie's person, when this browser signed in: its CSRF token is then used. */
async function resumeSession() {
  try {
    const { mySession } = await gql('{ mySession { csrfToken } }');
    if (!mySession) return false;
    useSession(mySession.csrfToken);
    return true;
  } catch {
    return false;
  }
}

onUnauthenticated((message) => {
  forgetToken();
  disconnect();
  if (polling) clearInterval(polling);
  polling = null;
  showLogin(message);
  showProviders().catch(() => undefined);
});

/** The plan the page's address names (`?plan=<id>`, a plan's reviewUrl), until it is opened. */
let linkedPlan = new URLSearchParams(location.search).get('plan');

/** Opens the linked plan, once: a reconnect later leaves the page as the reviewer left it. */
async function openLinkedPlan() {
  const id = linkedPlan;
  linkedPlan = null;
  if (!id) return;
  await openPlan(id);
  if ($('plan-view').hidden) showError(new Error(`there is no plan ${id}`));
}

/**
 * The role adapts the page: the queue for REVIEWER/ADMIN; the plan on screen is read again,
 * or, on the first start, the plan the address names is opened.
 */
async function consoleStart() {
  const me = (await gql('{ whoami { name role groups person { name email } } }')).whoami;
  setMe(me);
  const person = me.person;
  $('who').textContent = person
    ? `${person.name || person.email || me.name}${person.email && person.name ? ` (${person.email})` : ''} · ${me.role}`
    : `${me.name} · ${me.role}`;
  document.body.dataset.role = me.role;
  $('queue').hidden = !canAct();
  if (canAct()) await refreshQueue();
  await refreshView();
  await openLinkedPlan();
  offerSlackLink(me);
}

// Every audit event: its environment's card, and shortly after the queue and the plan on screen.
let liveTimer = null;
const liveEnvironments = new Set();

function activity(event) {
  markDirty(event.environment);
  liveEnvironments.add(event.environment);
  if (liveTimer) return;
  liveTimer = setTimeout(() => {
    liveTimer = null;
    const touched = liveEnvironments.has(viewedEnvironment());
    liveEnvironments.clear();
    Promise.all([canAct() ? refreshQueue() : null, touched ? refreshView() : null]).catch(failed);
  }, 120);
}

// Catch up on what happened while disconnected, then listen again.
const reconnect = () => setTimeout(() => start().catch(showError), 1000);

/** With the session cookie the page reloads what it shows on this period (no subscription socket). */
let polling = null;

async function start() {
  const mine = nextGeneration();
  if (usingSession()) {
    polling ??= setInterval(() => start().catch(showError), 15000);
  } else {
    await connect(activity, reconnect);
  }
  if (mine !== currentGeneration()) return;
  const environments = await loadAll();
  if (mine !== currentGeneration()) return;
  showAll(environments);
  if (listening()) setStatus('live', true);
  else if (usingSession()) setStatus('signed in', true);
  consoleStart().catch(showError);
}

wirePlanView();
$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  setToken($('token').value.trim());
  $('login').hidden = true;
  $('sign-out').hidden = false;
  start().catch(showError);
});
$('sign-out').addEventListener('click', () => {
  forgetToken();
  location.reload();
});
$('log-out').addEventListener('click', () => {
  gql('mutation { logout }')
    .catch(() => null)
    .finally(() => {
      forgetToken();
      location.reload();
    });
});
setInterval(() => {
  tickLeases();
  tickHeartbeats();
}, 1000);

if (token()) {
  $('sign-out').hidden = false;
  start().catch(showError);
} else {
  resumeSession().then((signedIn) => {
    if (signedIn) {
      $('log-out').hidden = false;
      start().catch(showError);
    } else {
      showLogin();
      showProviders().catch(() => undefined);
    }
  });
}
