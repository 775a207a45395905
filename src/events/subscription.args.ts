import { ArgsType, Field, ID } from '@nestjs/graphql';
import { IsOptional, Matches } from 'class-validator';
import { IsPlanId, IsRowId } from '../common/validation.js';
import { DEPLOYMENT_ID_PATTERN } from '../common/ids.js';
import { EnvironmentArgs } from '../common/environment.args.js';

const CURSOR =
  'resume after this one: the events after it are sent first, then the live ones (docs/subscriptions.md)';

@ArgsType()
export class PlanPublishedArgs extends EnvironmentArgs {
  @Field(() => ID, { nullable: true, description: `A plan id of the environment: ${CURSOR}` })
  @IsOptional()
  @IsPlanId()
  after?: string | null;
}

@ArgsType()
export class AuditEventRecordedArgs extends EnvironmentArgs {
  @Field(() => ID, { nullable: true, description: `An audit event id: ${CURSOR}` })
  @IsOptional()
  @IsRowId('an audit event id')
  after?: string | null;
}

@ArgsType()
export class DeploymentChangedArgs extends EnvironmentArgs {
  @Field(() => ID, {
    nullable: true,
    description: `A deployment id of the environment (<environment>#<sequence>): ${CURSOR}`,
  })
  @IsOptional()
  @Matches(DEPLOYMENT_ID_PATTERN, {
    message: '$property must be a deployment id: <environment>#<sequence>',
  })
  after?: string | null;
}
