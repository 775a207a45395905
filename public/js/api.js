// The credential: a pasted token (kept in this tab's session only), or the session cookie
// of a person who signed in (DESIGN §19); GraphQL over fetch.

const TOKEN_KEY = 'planfence.token';

/** The session's CSRF token (mySession.csrfToken), sent with every request made with the cookie (R42). */
let csrfToken = null;

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  csrfToken = null;
}

/** Signed in with the session cookie: its CSRF token goes with every request. */
export function useSession(csrf) {
  csrfToken = csrf;
}

/** Whether this page uses the session cookie (no pasted token). */
export function usingSession() {
  return !token() && csrfToken !== null;
}

/** One GraphQL request; an error answer is thrown with its code (`error.code`). */
export async function gql(query, variables = {}) {
  const headers = { 'content-type': 'application/json' };
  const pasted = token();
  if (pasted) headers.authorization = `Bearer ${pasted}`;
  else if (csrfToken) headers['x-planfence-csrf'] = csrfToken;
  const response = await fetch('/graphql', {
    method: 'POST',
    headers,
    credentials: 'same-origin',
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

/** The providers people sign in with (empty when the service has none). */
export async function signInProviders() {
  try {
    const response = await fetch('/auth/logins', { credentials: 'same-origin' });
    if (!response.ok) return [];
    return (await response.json()).logins || [];
  } catch {
    return [];
  }
}
