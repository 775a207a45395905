import { DomainError } from '../common/errors.js';

export const EnvironmentErrorCode = {
  NOT_FOUND: 'NOT_FOUND',
  ALREADY_EXISTS: 'ALREADY_EXISTS',
} as const;
export type EnvironmentErrorCode = (typeof EnvironmentErrorCode)[keyof typeof EnvironmentErrorCode];

export class EnvironmentError extends DomainError<EnvironmentErrorCode> {
  static notFound(name: string): EnvironmentError {
    return new EnvironmentError('NOT_FOUND', `environment "${name}" does not exist`);
  }
}
