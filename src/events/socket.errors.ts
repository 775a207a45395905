import { DomainError } from '../common/errors.js';

export const SocketErrorCode = {
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  RATE_LIMITED: 'RATE_LIMITED',
} as const;
export type SocketErrorCode = (typeof SocketErrorCode)[keyof typeof SocketErrorCode];

/** A subscription refused by the WebSocket limits (docs/security.md, "WebSockets"). */
export class SocketError extends DomainError<SocketErrorCode> {}

/** Close codes of the graphql-ws protocol that planfence uses. */
export const CloseCode = {
  /** A frame that breaks the protocol (e.g. a second `connection_init`). */
  BadRequest: 4400,
  /** No valid token: missing, malformed, unknown, revoked (reason starts with UNAUTHENTICATED). */
  Forbidden: 4403,
  /** No `connection_init` with a valid token within PLANFENCE_WS_INIT_TIMEOUT_SECONDS. */
  ConnectionInitialisationTimeout: 4408,
  /** Over a cap (reason starts with RATE_LIMITED), or more than one `connection_init`. */
  TooManyRequests: 4429,
} as const;
