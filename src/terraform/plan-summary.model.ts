import { Field, type FieldMiddleware, Int, ObjectType } from '@nestjs/graphql';

/** A summary stored before a field existed lacks it: the field reads [] there. */
const emptyWhenMissing: FieldMiddleware = async (_, next) => ((await next()) as unknown) ?? [];

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

  @Field(() => [String], {
    description:
      'The top-level attributes whose value is sensitive and changes: before and after both read "(sensitive)" though the values differ, so a console shows the row "(sensitive)" → "(sensitive)".',
    middleware: [emptyWhenMissing],
  })
  sensitiveChanges: string[];
}

@ObjectType({
  description:
    "A provisioner of the plan's configuration: local-exec runs its command on the machine that applies the plan.",
})
export class Provisioner {
  @Field({
    description: "The resource's configuration address, e.g. module.app.terraform_data.build",
  })
  address: string;

  @Field({ description: 'local-exec, remote-exec, file, ...' })
  type: string;

  @Field(() => String, {
    nullable: true,
    description:
      "local-exec's command as written (sensitive values masked); null where it is computed.",
  })
  command: string | null;
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

  @Field(() => [Provisioner], {
    description:
      'Every provisioner of the configuration, module by module: what the apply runs besides the resource changes (local-exec runs on the applier).',
    middleware: [emptyWhenMissing],
  })
  provisioners: Provisioner[];

  @Field(() => String, { nullable: true })
  terraformVersion: string | null;
}
