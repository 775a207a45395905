import { Field, InputType, Int } from '@nestjs/graphql';
import { IsBoolean, IsEnum } from 'class-validator';
import { IsName } from '../../common/validation.js';
import { FencingMode } from '../../model/environment.entity.js';
import { ApprovalRuleInput, IsApprovalRules, IsProposalTtl } from './policy.inputs.js';

@InputType()
export class CreateEnvironmentInput {
  @Field({ description: '^[a-z0-9][a-z0-9._-]{0,62}$' })
  @IsName()
  name: string;

  @Field(() => FencingMode, { defaultValue: FencingMode.MONOTONIC })
  @IsEnum(FencingMode)
  mode: FencingMode;

  @Field({ defaultValue: true })
  @IsBoolean()
  requireApproval: boolean;

  @Field(() => [ApprovalRuleInput], {
    nullable: true,
    description: 'Default: [{ group: null, count: 1 }]',
  })
  @IsApprovalRules()
  approvalRules?: ApprovalRuleInput[] | null;

  @Field(() => Int, { nullable: true })
  @IsProposalTtl()
  proposalTtlSeconds?: number | null;
}
