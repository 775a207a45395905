import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { map, type Observable } from 'rxjs';
import { gqlRequest } from './roles.decorator.js';
import { allowsEnvironment } from './scope.js';

/**
 * Filters a list query's answer to the caller's environments (R26): a limited token sees
 * only its environments' items. Applied to each list whose items belong to environments
 * (`@UseInterceptors(ScopedListInterceptor)`), not globally: a resolver without an
 * interceptor is called without building one (rxjs) per field.
 */
@Injectable()
export class ScopedListInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const patterns = gqlRequest(context).principal?.environments;
    if (!Array.isArray(patterns)) return next.handle();
    return next
      .handle()
      .pipe(
        map((items: unknown) =>
          Array.isArray(items)
            ? items.filter((item: { environment?: string; name?: string }) =>
                allowsEnvironment(patterns, item.environment ?? item.name ?? ''),
              )
            : items,
        ),
      );
  }
}
