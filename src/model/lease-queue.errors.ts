import { DomainError } from '../common/errors.js';

/** The rejections of the lease queue (docs/design.md §17). */
export const QueueErrorCode = {
  QUEUE_FULL: 'QUEUE_FULL',
  NOT_FOUND: 'NOT_FOUND',
  FORBIDDEN: 'FORBIDDEN',
} as const;
export type QueueErrorCode = (typeof QueueErrorCode)[keyof typeof QueueErrorCode];

export class QueueError extends DomainError<QueueErrorCode> {
  static ticketNotFound(id: string | number): QueueError {
    return new QueueError('NOT_FOUND', `lease ticket ${id} does not exist`);
  }
}
