import { Field, GraphQLISODateTime, ObjectType, registerEnumType } from '@nestjs/graphql';

/** R50: what a check reports about a plan. */
export enum CheckStatus {
  PENDING = 'PENDING',
  SUCCESS = 'SUCCESS',
  FAILURE = 'FAILURE',
}

registerEnumType(CheckStatus, { name: 'CheckStatus' });

/** R50: the latest result of one check on one plan (earlier ones are in the audit log). */
@ObjectType()
export class CheckResult {
  @Field()
  name: string;

  @Field(() => CheckStatus)
  status: CheckStatus;

  @Field(() => String, { nullable: true })
  summary: string | null;

  @Field(() => String, { nullable: true })
  detailsUrl: string | null;

  @Field()
  reportedBy: string;

  @Field(() => GraphQLISODateTime)
  at: Date;
}
