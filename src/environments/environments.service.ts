import { Injectable } from '@nestjs/common';
import { MoreThan } from 'typeorm';
import { Clock } from '../common/clock.js';
import { Database } from '../database/database.js';
import { DecisionRunner } from '../fencing/decision.runner.js';
import { FenceService, liveLease } from '../fencing/fence.service.js';
import type { Lease } from '../leases/lease.model.js';
import { Plan } from '../plans/plan.entity.js';
import type { CreateEnvironmentInput } from './dto/create-environment.input.js';
import { Environment } from './environment.entity.js';
import { EnvironmentError } from './environment.errors.js';
import { findOne } from '../database/rows.js';

@Injectable()
export class EnvironmentsService {
  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly decisions: DecisionRunner,
    private readonly fence: FenceService,
  ) {}

  create(actor: string, input: CreateEnvironmentInput): Promise<Environment> {
    return this.decisions.decide(
      { action: 'CREATE_ENVIRONMENT', environment: input.name, actor },
      (m, now) => this.fence.createEnvironment(m, { ...input, now }),
      (env) => ({ detail: `mode ${env.mode}, requireApproval ${env.requireApproval}` }),
    );
  }

  list(): Promise<Environment[]> {
    return this.db.read((m) => m.find(Environment, { order: { name: 'ASC' } }));
  }

  /** One page in name order: the environments named after `after`, at most `first` (null: all). */
  listPage(first: number | null, after: string | null): Promise<Environment[]> {
    return this.db.read((m) =>
      m.find(Environment, {
        where: after === null ? {} : { name: MoreThan(after) },
        order: { name: 'ASC' },
        ...(first === null ? {} : { take: first }),
      }),
    );
  }

  find(name: string): Promise<Environment | null> {
    return this.db.read((m) => findOne(m, Environment, { name }));
  }

  /** NOT_FOUND when the environment does not exist. */
  async get(name: string): Promise<Environment> {
    const env = await this.find(name);
    if (!env) throw EnvironmentError.notFound(name);
    return env;
  }

  async lease(env: Environment): Promise<Lease | null> {
    return liveLease(env, await this.clock.now());
  }

  async currentPlan(name: string): Promise<Plan | null> {
    return this.plan((await this.get(name)).currentPlanId);
  }

  plan(id: string | null): Promise<Plan | null> {
    return id ? this.db.read((m) => findOne(m, Plan, { id })) : Promise.resolve(null);
  }
}
