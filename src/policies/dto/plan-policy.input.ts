import { ArgsType, Field, InputType, Int } from '@nestjs/graphql';
import { IsEnum, IsOptional, Length } from 'class-validator';
import { IsName } from '../../common/validation.js';
import { PlanContentType } from '../activation.js';
import { PolicyEffect } from '../plan-policy.model.js';

/** Checked by PoliciesService.validate, which names the policy in its refusal (BAD_USER_INPUT {policy, error}). */
@InputType()
export class PlanPolicyInput {
  @Field({ description: 'Like an environment name; unique within the environment.' })
  name: string;

  @Field({ description: 'CEL, at most 4 KiB.' })
  expression: string;

  @Field(() => PolicyEffect)
  effect: PolicyEffect;

  @Field()
  message: string;

  @Field(() => String, { nullable: true })
  group?: string | null;

  @Field(() => Int, { nullable: true })
  count?: number | null;
}

@ArgsType()
export class DryRunPlanPoliciesArgs {
  @Field()
  @IsName()
  environment: string;

  /** Absent: the environment's own policies. */
  @Field(() => [PlanPolicyInput], { nullable: true })
  planPolicies?: PlanPolicyInput[] | null;

  /** Limited by PLANFENCE_MAX_PLAN_BYTES like a submit's; not empty, as a submit's. */
  @Field()
  @Length(1, undefined, { message: 'content must not be empty' })
  content: string;

  @Field(() => PlanContentType, { defaultValue: PlanContentType.TEXT })
  @IsOptional()
  @IsEnum(PlanContentType)
  contentType: PlanContentType;
}
