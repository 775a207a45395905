import { ArgsType, Field, Int } from '@nestjs/graphql';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { IsName } from '../../common/validation.js';

/** Environment rows are small and bounded, so a page may hold many more than a page of plans. */
export const MAX_ENVIRONMENTS_PAGE = 10_000;

@ArgsType()
export class EnvironmentsPageArgs {
  @Field(() => Int, {
    nullable: true,
    description: `At most this many, in name order (1..${MAX_ENVIRONMENTS_PAGE}); omitted: all of them.`,
  })
  @IsOptional()
  @IsInt()
  @Min(1, { message: `first must be 1 to ${MAX_ENVIRONMENTS_PAGE}` })
  @Max(MAX_ENVIRONMENTS_PAGE, { message: `first must be 1 to ${MAX_ENVIRONMENTS_PAGE}` })
  first?: number | null;

  @Field(() => String, {
    nullable: true,
    description: 'The name of the last environment of the previous page.',
  })
  @IsOptional()
  @IsName()
  after?: string | null;
}
