/**
 * A sign-in the service refuses (R40): no login rule matches, the principal was revoked, or
 * the rule's name is another principal's. The person sees `message` on a page; nothing is
 * created, and the attempt is recorded.
 */
export class SignInRefused extends Error {
  readonly code = 'FORBIDDEN';
}

/** The sign-in itself failed (bad state, nonce, code or ID token): the person starts again. */
export class SignInFailed extends Error {
  readonly code = 'UNAUTHENTICATED';
}
