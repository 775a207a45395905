import type { EntityManager } from 'typeorm';
import { findOne } from '../database/rows.js';
import { Environment } from '../model/environment.entity.js';
import { EnvironmentError } from '../model/environment.errors.js';
import type { Lease } from '../leases/lease.model.js';
import { Plan } from '../model/plan.entity.js';
import { FenceError } from './fence.errors.js';

/** The live lease of an environment row at `now`, or null. */
export function liveLease(env: Environment, now: number): Lease | null {
  // Holder and expiry are set and cleared together, by the same statements.
  if (env.leaseExpiresAt == null || env.leaseExpiresAt <= now) return null;
  return {
    environment: env.name,
    holder: env.leaseHolder!,
    generation: env.leaseGeneration ?? 0,
    acquiredAt: new Date(env.leaseAcquiredAt ?? 0),
    expiresAt: new Date(env.leaseExpiresAt),
  };
}

/** The environment's row, or NOT_FOUND. */
export async function readEnvironment(m: EntityManager, name: string): Promise<Environment> {
  const env = await findOne(m, Environment, { name });
  if (!env) throw EnvironmentError.notFound(name);
  return env;
}

/** The plan's row, or NOT_FOUND. */
export async function readPlan(m: EntityManager, id: string): Promise<Plan> {
  const plan = await findOne(m, Plan, { id });
  if (!plan) throw new FenceError('NOT_FOUND', `plan ${id} does not exist`);
  return plan;
}
