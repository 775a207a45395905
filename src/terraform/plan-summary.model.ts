import { Field, Int, ObjectType } from '@nestjs/graphql';

@ObjectType()
export class ResourceChange {
  @Field({ description: 'e.g. module.db.aws_db_instance.main' })
  address: string;

  @Field()
  type: string;

  @Field(() => [String], {
    description: 'Terraform\'s actions, e.g. ["delete","create"] for a replacement.',
  })
  actions: string[];

  @Field(() => String, {
    nullable: true,
    description:
      'JSON of the resource\'s values before and after, each value Terraform marks sensitive replaced by "(sensitive)"; null where Terraform has none.',
  })
  before: string | null;

  @Field(() => String, { nullable: true })
  after: string | null;
}

@ObjectType({ description: "Computed by the service from the plan's content; immutable." })
export class PlanSummary {
  @Field(() => Int)
  add: number;

  @Field(() => Int)
  change: number;

  @Field(() => Int)
  destroy: number;

  @Field(() => Int)
  replace: number;

  @Field(() => Int)
  read: number;

  @Field(() => Int)
  noop: number;

  @Field(() => [ResourceChange], {
    description: 'Every resource whose actions are not ["no-op"], in the document\'s order.',
  })
  resourceChanges: ResourceChange[];

  @Field(() => String, { nullable: true })
  terraformVersion: string | null;
}
