import { Field, InputType, Int, ObjectType } from '@nestjs/graphql';
import { IsInt, Length, Max, Min } from 'class-validator';
import { MAX_INT32 } from '../common/validation.js';

/** A Terraform state, by the two fields that order it: its lineage and serial (DESIGN R56). */
@ObjectType()
export class TerraformState {
  /** The state's lineage: states of other lineages are not compared. */
  @Field()
  lineage: string;

  /** Grows with every write of the state. */
  @Field(() => Int)
  serial: number;
}

@InputType()
export class TerraformStateInput {
  @Field()
  @Length(1, 64)
  lineage: string;

  @Field(() => Int)
  @IsInt()
  @Min(0)
  @Max(MAX_INT32)
  serial: number;
}
