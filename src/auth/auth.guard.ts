import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthError } from './auth.errors.js';
import { AuthService } from './auth.service.js';
import { Role } from './principal.entity.js';
import { gqlRequest, ROLES_KEY } from './roles.decorator.js';

/** Every GraphQL operation needs a bearer token; `@Roles` narrows who may call it (DESIGN §5). */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType<string>() !== 'graphql') return true;
    const req = gqlRequest(context);
    const header = req.headers.authorization;
    req.principal ??= await this.auth.authenticate(Array.isArray(header) ? header[0] : header);
    const allowed = this.reflector.get<Role[] | undefined>(ROLES_KEY, context.getHandler());
    const role = req.principal.role;
    if (!allowed || role === Role.ADMIN || allowed.includes(role)) return true;
    throw new AuthError('FORBIDDEN', `role ${role} may not call ${context.getHandler().name}`);
  }
}
