import { Field, GraphQLISODateTime, ObjectType } from '@nestjs/graphql';
import type { ApprovalRule } from '../environments/policy.model.js';

/** One principal's approval of one plan (R15): bound to the plan's id, so to its generation and content. */
@ObjectType()
export class Approval {
  @Field()
  approver: string;

  @Field(() => GraphQLISODateTime)
  at: Date;

  @Field({ description: "The plan's contentHash: what the approver approved." })
  contentHash: string;

  @Field(() => String, {
    nullable: true,
    description: "Set on an ADMIN's break-glass approval.",
  })
  breakGlassReason: string | null;

  @Field(() => String, {
    nullable: true,
    description:
      'The door the approval came through: graphql, mcp or slack (null: recorded before doors were).',
  })
  via: string | null;
}

/** What an approval's answer shows, read in the approval's own transaction (coherent with its status). */
export interface ApprovalSnapshot {
  approvals: Approval[];
  pendingApprovalRules: ApprovalRule[];
}
