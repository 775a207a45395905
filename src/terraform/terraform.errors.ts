import { DomainError } from '../common/errors.js';

/** Why a Terraform plan document was refused (DESIGN §15). */
export const TerraformErrorCode = {
  BAD_USER_INPUT: 'BAD_USER_INPUT',
} as const;
export type TerraformErrorCode = (typeof TerraformErrorCode)[keyof typeof TerraformErrorCode];

export class TerraformPlanError extends DomainError<TerraformErrorCode> {
  constructor(message: string) {
    super('BAD_USER_INPUT', message);
  }
}
