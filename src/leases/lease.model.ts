import { Field, GraphQLISODateTime, Int, ObjectType } from '@nestjs/graphql';

@ObjectType()
export class Lease {
  @Field()
  environment: string;

  @Field({ description: 'principal name, or principal/instance' })
  holder: string;

  @Field(() => Int, {
    description: 'The fencing token: carried by every write made under this lease.',
  })
  generation: number;

  @Field(() => GraphQLISODateTime)
  acquiredAt: Date;

  @Field(() => GraphQLISODateTime)
  expiresAt: Date;
}
