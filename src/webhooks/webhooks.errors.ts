import { DomainError } from '../common/errors.js';

/** The rejections of webhook administration (docs/design.md §6, §11). */
export const WebhookErrorCode = {
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  NOT_FOUND: 'NOT_FOUND',
  FORBIDDEN: 'FORBIDDEN',
} as const;
export type WebhookErrorCode = (typeof WebhookErrorCode)[keyof typeof WebhookErrorCode];

export class WebhookError extends DomainError<WebhookErrorCode> {
  static badInput(message: string): WebhookError {
    return new WebhookError('BAD_USER_INPUT', message);
  }

  static notFound(what: string, id: string): WebhookError {
    return new WebhookError('NOT_FOUND', `${what} ${id} does not exist`);
  }
}
