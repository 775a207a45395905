import { ArgsType, Field, ID, InputType, Int } from '@nestjs/graphql';
import { applyDecorators } from '@nestjs/common';
import { Type } from 'class-transformer';
import {
  IsEnum,
  IsInt,
  IsOptional,
  Length,
  Matches,
  Max,
  Min,
  ValidateNested,
} from 'class-validator';
import {
  IsName,
  IsOptionalShortText,
  IsPageSize,
  IsPlanId,
  IsShortText,
} from '../../common/validation.js';
import { TerraformStateInput } from '../../terraform/terraform-state.model.js';
import { DeploymentOutcome } from '../../model/deployment.entity.js';
import { DEPLOYMENT_ID_PATTERN } from '../../common/ids.js';

const IsDeploymentId = () =>
  Matches(DEPLOYMENT_ID_PATTERN, {
    message: '$property must be a deployment id: <environment>#<sequence>',
  });

const IsHeartbeatSeconds = () =>
  applyDecorators(
    IsInt(),
    Min(5, { message: '$property must be 5 to 3600' }),
    Max(3600, { message: '$property must be 5 to 3600' }),
  );

/** Details and notes: up to 4096 characters. */
const IsNote = () => Length(1, 4096, { message: '$property must be 1 to 4096 characters long' });

@InputType()
export class StartDeploymentInput {
  @Field()
  @IsName()
  environment: string;

  @Field(() => ID, { description: "Must be the environment's current plan." })
  @IsPlanId()
  planId: string;

  @Field()
  @IsShortText()
  idempotencyKey: string;

  @Field(() => Int, { defaultValue: 60, description: '5..3600' })
  @IsHeartbeatSeconds()
  heartbeatSeconds: number;
}

@InputType()
export class HeartbeatDeploymentInput {
  @Field(() => ID)
  @IsDeploymentId()
  deploymentId: string;

  @Field(() => Int, { defaultValue: 60 })
  @IsHeartbeatSeconds()
  heartbeatSeconds: number;
}

@InputType()
export class FinishDeploymentInput {
  @Field(() => ID)
  @IsDeploymentId()
  deploymentId: string;

  @Field(() => DeploymentOutcome)
  @IsEnum(DeploymentOutcome)
  outcome: DeploymentOutcome;

  @Field(() => String, { nullable: true })
  @IsOptional()
  @IsNote()
  detail?: string | null;

  @Field(() => String, { nullable: true })
  @IsOptionalShortText()
  idempotencyKey?: string | null;

  @Field(() => TerraformStateInput, {
    nullable: true,
    description: 'The Terraform state after the apply (DESIGN R56), as the applier read it.',
  })
  @IsOptional()
  @ValidateNested()
  @Type(() => TerraformStateInput)
  state?: TerraformStateInput | null;
}

@InputType()
export class ReconcileDeploymentInput {
  @Field(() => ID)
  @IsDeploymentId()
  deploymentId: string;

  @Field(() => DeploymentOutcome)
  @IsEnum(DeploymentOutcome)
  outcome: DeploymentOutcome;

  @Field()
  @IsNote()
  note: string;
}

@ArgsType()
export class DeploymentArgs {
  @Field(() => ID)
  @Length(1, 255)
  id: string;
}

@ArgsType()
export class DeploymentsArgs {
  @Field()
  @IsName()
  environment: string;

  @Field(() => Int, { defaultValue: 50 })
  @IsPageSize()
  first: number;

  @Field(() => ID, {
    nullable: true,
    description: 'the id of the last deployment of the previous page',
  })
  @IsOptional()
  @IsDeploymentId()
  after?: string | null;
}

/** R53: drift seen in an environment, outside any deployment. */
@ArgsType()
export class ReportDriftArgs {
  @Field()
  @IsName()
  environment: string;

  @Field({ description: 'What drifted, up to 1,024 characters.' })
  @Length(1, 1024, { message: '$property must be 1 to 1024 characters long' })
  detail: string;
}
