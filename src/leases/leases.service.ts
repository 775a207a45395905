import { Injectable } from '@nestjs/common';
import type { Principal } from '../model/principal.entity.js';
import { DecisionRunner } from '../decisions/decision.runner.js';
import { LeaseWrites } from '../fencing/lease-writes.js';
import type { AcquireLeaseInput, ReleaseLeaseInput, RenewLeaseInput } from './dto/lease.inputs.js';
import type { Lease } from './lease.model.js';

@Injectable()
export class LeasesService {
  constructor(
    private readonly decisions: DecisionRunner,
    private readonly writes: LeaseWrites,
  ) {}

  acquire(principal: Principal, input: AcquireLeaseInput): Promise<Lease> {
    const holder = input.instance ? `${principal.name}/${input.instance}` : principal.name;
    return this.decisions.decide(
      { action: 'ACQUIRE_LEASE', environment: input.environment, actor: holder },
      (tx) =>
        this.writes.grantLease(tx, {
          environment: input.environment,
          principal: principal.name,
          holder,
          ttlMs: input.ttlSeconds * 1000,
          now: tx.now,
        }),
      (lease) => ({
        generation: lease.generation,
        detail: `expires ${lease.expiresAt.toISOString()}`,
      }),
    );
  }

  renew(principal: Principal, input: RenewLeaseInput): Promise<Lease> {
    return this.decisions.decide(
      {
        action: 'RENEW_LEASE',
        environment: input.environment,
        actor: principal.name,
        generation: input.generation,
      },
      (tx) =>
        this.writes.renewLease(tx, {
          ...input,
          principal: principal.name,
          ttlMs: input.ttlSeconds * 1000,
          now: tx.now,
        }),
      (lease) => ({ detail: `expires ${lease.expiresAt.toISOString()}` }),
    );
  }

  async release(principal: Principal, input: ReleaseLeaseInput): Promise<boolean> {
    await this.decisions.decide(
      {
        action: 'RELEASE_LEASE',
        environment: input.environment,
        actor: principal.name,
        generation: input.generation,
      },
      (tx) => this.writes.releaseLease(tx, { ...input, principal: principal.name, now: tx.now }),
    );
    return true;
  }
}
