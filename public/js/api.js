// The signed-in token (kept in this tab's session only) and GraphQL over fetch.

const TOKEN_KEY = 'planfence.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** One GraphQL request; an error answer is thrown with its code (`error.code`). */
export async function gql(query, variables = {}) {
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
