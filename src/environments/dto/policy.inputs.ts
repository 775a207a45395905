import { ArgsType, Field, InputType, Int } from '@nestjs/graphql';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsInt,
  IsOptional,
  Max,
  Min,
  ValidateNested,
} from 'class-validator';
import { IsName, IsShortText } from '../../common/validation.js';
import { PlanPolicyInput } from '../../policies/dto/plan-policy.input.js';
import { QueueMode } from '../environment.entity.js';

export const MAX_PROPOSAL_TTL_SECONDS = 2_592_000;

@InputType()
export class ApprovalRuleInput {
  @Field(() => String, { nullable: true })
  @IsOptional()
  @IsName()
  group?: string | null;

  @Field(() => Int, { defaultValue: 1, description: '1..10' })
  @IsInt()
  @Min(1, { message: '$property must be 1 to 10' })
  @Max(10, { message: '$property must be 1 to 10' })
  count: number;
}

/** docs/design.md §6: 1–10 rules per environment. */
export const IsApprovalRules = () => (target: object, property: string) => {
  IsOptional()(target, property);
  ArrayMinSize(1, { message: '$property must hold 1 to 10 rules' })(target, property);
  ArrayMaxSize(10, { message: '$property must hold 1 to 10 rules' })(target, property);
  ValidateNested({ each: true })(target, property);
  Type(() => ApprovalRuleInput)(target, property);
};

/** docs/design.md §6: 1–2,592,000 seconds (30 days). */
export const IsProposalTtl = () => (target: object, property: string) => {
  IsOptional()(target, property);
  IsInt()(target, property);
  Min(1, { message: `$property must be 1 to ${MAX_PROPOSAL_TTL_SECONDS}` })(target, property);
  Max(MAX_PROPOSAL_TTL_SECONDS, { message: `$property must be 1 to ${MAX_PROPOSAL_TTL_SECONDS}` })(
    target,
    property,
  );
};

@InputType()
export class UpdateEnvironmentPolicyInput {
  @Field()
  @IsName()
  environment: string;

  /** Absent or null: the rules stay as they are. */
  @Field(() => [ApprovalRuleInput], { nullable: true })
  @IsApprovalRules()
  approvalRules?: ApprovalRuleInput[] | null;

  /** Absent: unchanged; null: proposals no longer expire (plans submitted from now on). */
  @Field(() => Int, { nullable: true })
  @IsProposalTtl()
  proposalTtlSeconds?: number | null;

  /** Absent or null: unchanged. Checked (and each expression type-checked) by PoliciesService.validate. */
  @Field(() => [PlanPolicyInput], {
    nullable: true,
    description: "Replaces the environment's plan policies (0..20).",
  })
  planPolicies?: PlanPolicyInput[] | null;
  /** Absent or null: unchanged (DESIGN §17). */
  @Field(() => QueueMode, { nullable: true })
  @IsOptional()
  queueMode?: QueueMode | null;

  @Field(() => Int, { nullable: true, description: '1..100' })
  @IsOptional()
  @IsInt()
  @Min(1, { message: '$property must be 1 to 100' })
  @Max(100, { message: '$property must be 1 to 100' })
  maxQueueLength?: number | null;
}

@ArgsType()
export class FreezeEnvironmentArgs {
  @Field()
  @IsName()
  environment: string;

  @Field()
  @IsShortText()
  reason: string;
}
