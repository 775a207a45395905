import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/principal.entity.js';
import { InputError } from '../common/errors.js';
import { sha256 } from '../common/hash.js';
import { CONFIG } from '../config/config.module.js';
import type { Config } from '../config/config.js';
import { Database } from '../database/database.js';
import { EnvironmentsService } from '../environments/environments.service.js';
import { DecisionRunner } from '../fencing/decision.runner.js';
import { FenceService } from '../fencing/fence.service.js';
import { idempotentCall } from '../idempotency/idempotency.service.js';
import type {
  ApprovePlanInput,
  PlansArgs,
  RejectPlanInput,
  SubmitPlanInput,
} from './dto/plan.inputs.js';
import { Plan } from './plan.entity.js';
import { findOne } from '../database/rows.js';

/** `<environment>@<generation>.<sequence>`, already validated by the input's pattern. */
function parsePlanId(id: string): { environment: string; generation: number; sequence: number } {
  const [environment, position] = id.split('@');
  const [generation, sequence] = position.split('.').map(Number);
  return { environment, generation, sequence };
}

@Injectable()
export class PlansService {
  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly db: Database,
    private readonly decisions: DecisionRunner,
    private readonly fence: FenceService,
    private readonly environments: EnvironmentsService,
  ) {}

  submit(principal: Principal, input: SubmitPlanInput): Promise<Plan> {
    const bytes = Buffer.byteLength(input.content, 'utf8');
    if (bytes > this.config.maxPlanBytes) {
      throw new InputError(
        'PAYLOAD_TOO_LARGE',
        `plan content is ${bytes} bytes; the limit is ${this.config.maxPlanBytes} (PLANFENCE_MAX_PLAN_BYTES)`,
      );
    }
    const { idempotencyKey, ...call } = input;
    const canonical = {
      ...call,
      title: call.title ?? null,
      basedOnPlanId: call.basedOnPlanId ?? null,
    };
    return this.decisions.decidePlan(
      {
        action: 'SUBMIT_PLAN',
        environment: input.environment,
        actor: principal.name,
        generation: input.generation,
      },
      idempotentCall(principal.name, idempotencyKey, 'submitPlan', canonical),
      (m, now) =>
        this.fence.admitPlan(m, {
          ...canonical,
          principal: principal.name,
          contentHash: sha256(input.content),
          now,
        }),
    );
  }

  approve(principal: Principal, input: ApprovePlanInput): Promise<Plan> {
    const { idempotencyKey, ...call } = input;
    const canonical = { planId: call.planId, contentHash: call.contentHash ?? null };
    const { environment, generation } = parsePlanId(input.planId);
    return this.decisions.decidePlan(
      {
        action: 'APPROVE_PLAN',
        environment,
        actor: principal.name,
        generation,
        planId: input.planId,
      },
      idempotencyKey
        ? idempotentCall(principal.name, idempotencyKey, 'approvePlan', canonical)
        : null,
      (m, now) => this.fence.publishPlan(m, { ...canonical, reviewer: principal.name, now }),
    );
  }

  reject(principal: Principal, input: RejectPlanInput): Promise<Plan> {
    const { idempotencyKey, ...call } = input;
    const canonical = { planId: call.planId, reason: call.reason };
    const { environment, generation } = parsePlanId(input.planId);
    return this.decisions.decidePlan(
      {
        action: 'REJECT_PLAN',
        environment,
        actor: principal.name,
        generation,
        planId: input.planId,
      },
      idempotencyKey
        ? idempotentCall(principal.name, idempotencyKey, 'rejectPlan', canonical)
        : null,
      (m, now) => this.fence.rejectPlan(m, { ...canonical, reviewer: principal.name, now }),
    );
  }

  find(id: string): Promise<Plan | null> {
    return this.db.read((m) => findOne(m, Plan, { id }));
  }

  /** Newest first by (generation, sequence). NOT_FOUND for an unknown environment. */
  async list(args: PlansArgs): Promise<Plan[]> {
    await this.environments.get(args.environment);
    return this.db.read((m) => {
      const query = m
        .createQueryBuilder(Plan, 'p')
        .where('p.environment = :environment', { environment: args.environment })
        .orderBy('p.generation', 'DESC')
        .addOrderBy('p.sequence', 'DESC')
        .limit(args.first);
      if (args.status) query.andWhere('p.status = :status', { status: args.status });
      if (args.after) {
        const after = parsePlanId(args.after);
        query.andWhere('(p.generation < :g OR (p.generation = :g AND p.sequence < :s))', {
          g: after.generation,
          s: after.sequence,
        });
      }
      return query.getMany();
    });
  }
}
