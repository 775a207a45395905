// Linking a Slack user (DESIGN R46, docs/slack.md). `/planfence link` in Slack answers its
// user alone with a one-time link to `/?slack-link=<code>`, valid 10 minutes. Opened here by a
// person signed in, the console says who the Slack user would act as and, once the person
// confirms, calls linkSlack(code): from then on that Slack user's clicks are this person's.
// The code stays in the address through a sign-in (the sign-in returns to this address) and
// is removed from it once the person has answered.

import { gql } from './api.js';
import { $, el } from './dom.js';
import { showError } from './status.js';

/** The code the page's address carries, until it is offered. */
let pending = new URLSearchParams(location.search).get('slack-link');

/** The address without its slack-link code (history keeps no copy of it). */
function forgetCode() {
  const params = new URLSearchParams(location.search);
  params.delete('slack-link');
  const query = params.toString();
  history.replaceState(null, '', `${location.pathname}${query ? `?${query}` : ''}${location.hash}`);
}

/**
 * Once the console has started for `me` ({name, role, person}): offers the link the address
 * names, once. Nothing is linked before the person clicks "Link".
 */
export function offerSlackLink(me) {
  const code = pending;
  pending = null;
  if (!code) return;
  const who = me.person?.name || me.person?.email || me.name;
  const message = el(
    'p',
    'slack-link-message',
    `A Slack user asked to act as you (${who}, ${me.role}) in planfence: approving and rejecting plans from Slack as you. Link it only if you just typed /planfence link in Slack yourself.`,
  );
  const link = el('button', 'slack-link-confirm', 'Link my Slack user');
  link.type = 'button';
  const cancel = el('button', 'slack-link-cancel', 'Cancel');
  cancel.type = 'button';
  const box = el('section', 'slack-link', el('h2', null, 'Link Slack'), message, link, cancel);
  box.id = 'slack-link';
  document.body.insertBefore(box, $('environments'));
  cancel.addEventListener('click', () => {
    forgetCode();
    box.remove();
  });
  link.addEventListener('click', () => {
    link.disabled = true;
    cancel.disabled = true;
    gql('mutation($code: String!) { linkSlack(code: $code) { teamId userId } }', { code })
      .then(({ linkSlack }) => {
        message.textContent = `Linked: Slack user ${linkSlack.userId} (team ${linkSlack.teamId}) now acts as you. Undo with unlinkSlack, or ask an ADMIN.`;
      })
      .catch((error) => {
        message.textContent = `Not linked: ${error.message}`;
        showError(error);
      })
      .finally(() => {
        forgetCode();
        link.remove();
        cancel.textContent = 'Close';
        cancel.disabled = false;
        cancel.addEventListener('click', () => box.remove());
      });
  });
}
