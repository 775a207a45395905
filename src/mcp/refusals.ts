import { Logger } from '@nestjs/common';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { extensionsOf, isDomainError } from '../common/errors.js';
import { truncate } from '../common/logging.js';
import { type Extensions, nextStep } from './next-steps.js';

const logger = new Logger('MCP');

/**
 * R30: a domain refusal as a tool result: `isError`, `structuredContent` {code,
 * ...extensions} (the same extensions GraphQL gives, common/errors.ts), and one text saying
 * what happened and what to do next. Anything that is not a domain error is INTERNAL, logged
 * here, and reaches the agent without message, stack or SQL.
 */
export function refusal(error: unknown): CallToolResult {
  let extensions: { code: string } & Extensions;
  let message: string;
  if (isDomainError(error)) {
    extensions = extensionsOf(error);
    message = error.message;
  } else {
    logger.error(
      `unexpected error in a tool: ${truncate((error as Error)?.message ?? String(error), 1000)}`,
      (error as Error)?.stack,
    );
    extensions = { code: 'INTERNAL' };
    message = 'internal error';
  }
  return {
    isError: true,
    structuredContent: extensions,
    content: [
      {
        type: 'text',
        text: `${extensions.code}: ${message}. ${nextStep(extensions.code, extensions)}`,
      },
    ],
  };
}
