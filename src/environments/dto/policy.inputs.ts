import { ArgsType, Field, InputType, Int } from '@nestjs/graphql';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsBoolean,
  IsInt,
  IsOptional,
  Matches,
  Max,
  Min,
  ValidateNested,
} from 'class-validator';
import { IsName, IsShortText, NAME_PATTERN } from '../../common/validation.js';
import { PlanPolicyInput } from '../../policies/dto/plan-policy.input.js';
import { QueueMode } from '../../model/environment.entity.js';

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

/** R51, R52: minutes, 0..10080 (a week). */
export const MAX_PRECONDITION_MINUTES = 10_080;

@InputType()
export class PromotionInput {
  @Field()
  @IsName()
  from: string;

  @Field(() => Int, { defaultValue: 0, description: '0..10080' })
  @IsInt()
  @Min(0, { message: `$property must be 0 to ${MAX_PRECONDITION_MINUTES}` })
  @Max(MAX_PRECONDITION_MINUTES, { message: `$property must be 0 to ${MAX_PRECONDITION_MINUTES}` })
  soakMinutes: number;
}

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

  /** Absent or null: unchanged (R50). */
  @Field(() => [String], {
    nullable: true,
    description: 'Replaces the required checks (0..20 names).',
  })
  @IsOptional()
  @ArrayMaxSize(20, { message: '$property must hold 0 to 20 names' })
  @ArrayUnique({ message: '$property must not name a check twice' })
  @Matches(NAME_PATTERN, {
    each: true,
    message: '$property must hold names matching ^[a-z0-9][a-z0-9._-]{0,62}$',
  })
  requiredChecks?: string[] | null;

  /** Absent or null: unchanged; clearPromotion removes it (R51). */
  @Field(() => PromotionInput, {
    nullable: true,
    description: 'Null in the input leaves it; clearPromotion removes it.',
  })
  @IsOptional()
  @ValidateNested()
  @Type(() => PromotionInput)
  promotion?: PromotionInput | null;

  @Field(() => Boolean, { nullable: true })
  @IsOptional()
  @IsBoolean()
  clearPromotion?: boolean | null;

  /** R52: absent or null: unchanged; 0 removes the window. */
  @Field(() => Int, { nullable: true, description: '1..10080; 0 removes the window.' })
  @IsOptional()
  @IsInt()
  @Min(0, { message: `$property must be 1 to ${MAX_PRECONDITION_MINUTES}, or 0 to remove it` })
  @Max(MAX_PRECONDITION_MINUTES, {
    message: `$property must be 1 to ${MAX_PRECONDITION_MINUTES}, or 0 to remove it`,
  })
  deployWithinMinutes?: number | null;
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
