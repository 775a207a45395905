import { applyDecorators } from '@nestjs/common';
import { IsInt, Max, Min } from 'class-validator';
import { IsPlanId } from '../../common/validation.js';

const IsSeconds = (min: number, max: number) =>
  applyDecorators(
    IsInt(),
    Min(min, { message: `$property must be ${min} to ${max}` }),
    Max(max, { message: `$property must be ${min} to ${max}` }),
  );

/** The inputs only the MCP tools have (DESIGN §6: waitSeconds 0–300, timeoutSeconds 1–120). */
export class LeaseWaitInput {
  @IsSeconds(0, 300)
  waitSeconds: number;
}

export class WaitForDecisionInput {
  @IsPlanId()
  planId: string;

  @IsSeconds(1, 120)
  timeoutSeconds: number;
}
