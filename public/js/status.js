// The header's status line and what an error does: an expired or unknown token signs out.

import { $ } from './dom.js';

let signOut = () => {};

/** What happens when the service answers UNAUTHENTICATED (set once by main.js). */
export function onUnauthenticated(handler) {
  signOut = handler;
}

export function setStatus(text, live = false) {
  $('status').textContent = text;
  $('status').classList.toggle('live', live);
}

export function showError(error) {
  if (error.code === 'UNAUTHENTICATED') signOut(error.message);
  else $('status').textContent = `error: ${error.message}`;
}
