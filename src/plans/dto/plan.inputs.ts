import { ArgsType, Field, ID, InputType, Int } from '@nestjs/graphql';
import { IsEnum, IsOptional, Length, Matches } from 'class-validator';
import {
  IsDeploymentSequence,
  IsGeneration,
  IsName,
  IsOptionalShortText,
  IsPageSize,
  IsPlanId,
  IsShortText,
} from '../../common/validation.js';
import { PlanContentType, PlanStatus } from '../../model/plan.entity.js';

@InputType()
export class SubmitPlanInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int, { description: 'The fencing token of the lease the plan was produced under.' })
  @IsGeneration()
  generation: number;

  @Field()
  @IsShortText()
  idempotencyKey: string;

  /** Limited by PLANFENCE_MAX_PLAN_BYTES (PAYLOAD_TOO_LARGE), checked by the service. */
  @Field()
  @Length(1, undefined, { message: 'content must not be empty' })
  content: string;

  @Field(() => String, { nullable: true })
  @IsOptionalShortText()
  title?: string | null;

  @Field(() => ID, {
    nullable: true,
    description:
      'Publish only if the current plan is still this one (compare-and-swap on the pointer).',
  })
  @IsOptional()
  @IsPlanId()
  basedOnPlanId?: string | null;

  @Field(() => PlanContentType, { defaultValue: PlanContentType.TEXT })
  @IsEnum(PlanContentType)
  contentType: PlanContentType;

  /** Decoded, checked and limited (PLANFENCE_MAX_ARTIFACT_BYTES) by the service. */
  @Field(() => String, {
    nullable: true,
    description: 'Base64 of the binary plan file (TERRAFORM_PLAN_JSON only).',
  })
  @IsOptional()
  @Length(1, undefined, { message: 'artifact must not be empty' })
  artifact?: string | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "Publish and deploy only while the environment's deploymentSequence is still this (DESIGN R33).",
  })
  @IsOptional()
  @IsDeploymentSequence()
  basedOnDeploymentSequence?: number | null;

  @Field(() => String, { nullable: true, description: '1..255 characters' })
  @IsOptionalShortText()
  sourceRevision?: string | null;
}

@InputType()
export class ApprovePlanInput {
  @Field(() => ID)
  @IsPlanId()
  planId: string;

  @Field(() => String, {
    nullable: true,
    description:
      "When given, approval fails with PRECONDITION_FAILED unless the plan's contentHash matches.",
  })
  @IsOptional()
  @Matches(/^[0-9a-f]{64}$/, {
    message: 'contentHash must be 64 lowercase hex characters (sha256)',
  })
  contentHash?: string | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "When given, approval fails with PRECONDITION_FAILED {reason: DEPLOYMENT_SEQUENCE} unless the environment's deploymentSequence is still this: the reviewer saw the plan against it (a Slack message pins it).",
  })
  @IsOptional()
  @IsDeploymentSequence()
  deploymentSequence?: number | null;

  @Field(() => String, { nullable: true })
  @IsOptionalShortText()
  idempotencyKey?: string | null;

  @Field(() => String, {
    nullable: true,
    description:
      'ADMIN only: publish despite a freeze and the approval rules (never despite the fence); audited.',
  })
  @IsOptionalShortText()
  breakGlassReason?: string | null;
}

@InputType()
export class RejectPlanInput {
  @Field(() => ID)
  @IsPlanId()
  planId: string;

  @Field()
  @IsShortText()
  reason: string;

  @Field(() => String, { nullable: true })
  @IsOptionalShortText()
  idempotencyKey?: string | null;
}

@ArgsType()
export class PlanArgs {
  @Field(() => ID)
  @Length(1, 255)
  id: string;
}

@ArgsType()
export class PlansArgs {
  @Field()
  @IsName()
  environment: string;

  @Field(() => PlanStatus, { nullable: true })
  @IsOptional()
  @IsEnum(PlanStatus)
  status?: PlanStatus | null;

  @Field(() => Int, { defaultValue: 50 })
  @IsPageSize()
  first: number;

  @Field(() => ID, { nullable: true, description: 'the id of the last plan of the previous page' })
  @IsOptional()
  @IsPlanId()
  after?: string | null;
}

@ArgsType()
export class ReviewQueueArgs {
  @Field(() => Int, { defaultValue: 50 })
  @IsPageSize()
  first: number;
}
