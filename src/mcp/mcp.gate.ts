import { Injectable, type Type } from '@nestjs/common';
import { Access, type Handler } from '../access/access.js';
import type { Principal } from '../model/principal.entity.js';
import { throughMcp } from '../common/via.js';
import { validationPipe } from '../common/validation.js';
import { QuotasService } from '../quotas/quotas.service.js';

/** The GraphQL operation a tool call stands for: its resolver method, root type and arguments. */
export interface Operation {
  /** The resolver method: its `@Roles` say who may call it. */
  handler: Handler;
  root: 'Query' | 'Mutation';
  /** The arguments as GraphQL would pass them (`{ input }` for mutations, `{ id }`, `{ environment }`). */
  args: Record<string, unknown>;
}

/**
 * R28: every tool call passes the checks a GraphQL call of the same operation passes, in the
 * same order, with the same code: role (the resolver's `@Roles`) and the token's
 * environments (Access, audited on refusal), then the per-principal rate limits and quotas
 * (QuotasService.chargesFor: each tool call is one request), then the input's validation
 * (the operation's own input class and the validation pipe). The work then runs through the
 * `mcp` door, so its audit events say `via: mcp`. Decisions stay in the services it calls.
 */
@Injectable()
export class McpGate {
  constructor(
    private readonly access: Access,
    private readonly quotas: QuotasService,
  ) {}

  /** Whether `principal` may call the operation of `handler` at all (tools/list). */
  mayCall(principal: Principal, handler: Handler): boolean {
    return this.access.mayCall(principal.role, handler);
  }

  async pass<T>(principal: Principal, operation: Operation, work: () => Promise<T>): Promise<T> {
    // One tool call is one request: its charges and refusals are kept on this object.
    const request = {};
    this.access.checkRole(principal, operation.handler, request);
    this.access.checkUnscoped(principal, operation.handler, request);
    await this.access.checkScope(principal, operation.handler.name, operation.args, 'mcp', request);
    const state = this.quotas.requestState(request);
    if (state.refused) throw state.refused;
    this.quotas.admit(
      this.quotas.chargesFor(
        principal.name,
        {
          root: operation.root,
          name: operation.handler.name,
          input: operation.args.input as { environment?: unknown; content?: unknown } | undefined,
        },
        !state.charged,
      ),
    );
    return throughMcp(work);
  }

  /** The input as the operation's input class, validated like a GraphQL argument (BAD_USER_INPUT). */
  async valid<T extends object>(type: Type<T>, value: object, name = 'input'): Promise<T> {
    return (await validationPipe.transform(value, {
      type: 'body',
      metatype: type,
      data: name,
    })) as T;
  }
}
