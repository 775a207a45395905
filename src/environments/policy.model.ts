import { Field, GraphQLISODateTime, Int, ObjectType } from '@nestjs/graphql';

/** R14: `count` distinct approvers of `group` (of any group where null), the submitter never among them. */
@ObjectType()
export class ApprovalRule {
  @Field(() => String, {
    nullable: true,
    description: 'Approvers in this group count toward the rule; null: any approver.',
  })
  group: string | null;

  @Field(() => Int)
  count: number;
}

/** R17: while set, nothing in the environment is published except by an ADMIN's break-glass approval. */
@ObjectType()
export class Freeze {
  @Field()
  reason: string;

  @Field()
  frozenBy: string;

  @Field(() => GraphQLISODateTime)
  frozenAt: Date;
}

/** The policy every environment gets unless it says otherwise: one approval by anyone but the submitter. */
export const DEFAULT_APPROVAL_RULES: readonly ApprovalRule[] = [{ group: null, count: 1 }];

/** R51: plans are published here only after succeeding in `from` at least `soakMinutes` before. */
@ObjectType()
export class Promotion {
  @Field()
  from: string;

  @Field(() => Int)
  soakMinutes: number;
}
