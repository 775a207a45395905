import { DomainError } from '../common/errors.js';

export const McpErrorCode = {
  NOT_FOUND: 'NOT_FOUND',
  BAD_USER_INPUT: 'BAD_USER_INPUT',
} as const;
export type McpErrorCode = (typeof McpErrorCode)[keyof typeof McpErrorCode];

/** A refusal of the MCP tools themselves (an unknown plan to wait for, a call naming neither planId nor environment). */
export class McpError extends DomainError<McpErrorCode> {}
