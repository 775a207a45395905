import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { Observable } from 'rxjs';
import { throughDoor } from '../common/via.js';

/** Every GraphQL resolver runs as a request through the `graphql` door (AuditEvent.via). */
@Injectable()
export class GraphqlDoorInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType<string>() !== 'graphql') return next.handle();
    // The resolver runs when the handler's observable is subscribed to: subscribe inside.
    return new Observable((subscriber) =>
      throughDoor('graphql', () => next.handle().subscribe(subscriber)),
    );
  }
}
