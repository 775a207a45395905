import { Field, Int, ObjectType, registerEnumType } from '@nestjs/graphql';

export enum PolicyEffect {
  DENY = 'DENY',
  WARN = 'WARN',
  REQUIRE_APPROVAL = 'REQUIRE_APPROVAL',
}

registerEnumType(PolicyEffect, {
  name: 'PolicyEffect',
  valuesMap: {
    DENY: { description: 'The submit is refused (POLICY_DENIED); nothing is stored.' },
    WARN: { description: 'Stored with the plan and shown to reviewers.' },
    REQUIRE_APPROVAL: { description: 'Adds {group, count} to the approvals this plan needs.' },
  },
});

/** One of an environment's plan policies (DESIGN §16), as saved. */
@ObjectType()
export class PlanPolicy {
  @Field()
  name: string;

  @Field({ description: 'CEL, evaluating to a bool; true means the effect applies.' })
  expression: string;

  @Field(() => PolicyEffect)
  effect: PolicyEffect;

  @Field()
  message: string;

  @Field(() => String, {
    nullable: true,
    description: 'REQUIRE_APPROVAL only: approvers of this group (null: any approver).',
  })
  group: string | null;

  @Field(() => Int, { nullable: true, description: 'REQUIRE_APPROVAL only: 1..10' })
  count: number | null;
}

/** What one policy decided for one plan (R34): stored with the plan, immutable. */
@ObjectType()
export class PolicyResult {
  @Field()
  policy: string;

  @Field(() => PolicyEffect)
  effect: PolicyEffect;

  @Field({
    description:
      'Whether the expression evaluated to true (an evaluation error counts as true for DENY).',
  })
  matched: boolean;

  @Field(() => String, { nullable: true })
  message: string | null;

  @Field(() => String, { nullable: true, description: 'Why the evaluation failed, if it did.' })
  error: string | null;
}
