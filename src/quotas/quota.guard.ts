import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { GraphQLResolveInfo } from 'graphql';
import type { Principal } from '../model/principal.entity.js';
import { QuotasService } from './quotas.service.js';

const ROOT_TYPES = new Set(['Query', 'Mutation', 'Subscription']);

/**
 * Charges each GraphQL root field against the caller's limits before its resolver runs
 * (QuotasService.chargesFor; aliases of one mutation count one each). Once a request is
 * refused, the rest of its fields are refused with it.
 *
 * Registered after the AuthGuard (QuotasModule is imported after AuthModule), so the
 * principal is known and unauthenticated or forbidden calls have already been turned away.
 */
@Injectable()
export class QuotaGuard implements CanActivate {
  constructor(private readonly quotas: QuotasService) {}

  canActivate(context: ExecutionContext): boolean {
    if (context.getType<string>() !== 'graphql') return true;
    const gql = GqlExecutionContext.create(context);
    const info = gql.getInfo<GraphQLResolveInfo>();
    if (!ROOT_TYPES.has(info.parentType.name)) return true;
    const ctx = gql.getContext<{ req?: { principal?: Principal } }>();
    const principal = ctx.req?.principal;
    if (!principal) return true;

    const request = this.quotas.requestState(ctx);
    if (request.refused) throw request.refused;
    const first = !request.charged;
    request.charged = true;
    const charges = this.quotas.chargesFor(
      principal.name,
      {
        root: info.parentType.name,
        name: info.fieldName,
        input: gql.getArgs<{ input?: { environment?: unknown; content?: unknown } }>().input,
      },
      first,
    );
    try {
      this.quotas.admit(charges);
    } catch (error) {
      // A request refused at its first field is refused whole; a later field refused for
      // its own write, lease or bytes leaves the fields before it done.
      if (charges[0]?.buckets === this.quotas.requests) request.refused = error as Error;
      throw error;
    }
    return true;
  }
}
