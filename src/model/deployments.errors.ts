import { DomainError } from '../common/errors.js';

/** The rejections of deployment decisions (docs/design.md §10, §6). */
export const DeploymentErrorCode = {
  NOT_FOUND: 'NOT_FOUND',
  PRECONDITION_FAILED: 'PRECONDITION_FAILED',
  DEPLOYMENT_ACTIVE: 'DEPLOYMENT_ACTIVE',
  DEPLOYMENT_NOT_ACTIVE: 'DEPLOYMENT_NOT_ACTIVE',
} as const;
export type DeploymentErrorCode = (typeof DeploymentErrorCode)[keyof typeof DeploymentErrorCode];

export class DeploymentError extends DomainError<DeploymentErrorCode> {
  static notFound(id: string): DeploymentError {
    return new DeploymentError('NOT_FOUND', `deployment ${id} does not exist`);
  }
}
