import type { EntityManager } from 'typeorm';
import { execute, select } from '../database/sql.js';

/**
 * The environment rows each transaction holds. On PostgreSQL a statement that changed a row
 * holds that row's lock to the end of its transaction (these transactions use no savepoints
 * there), so a transaction that already changed its environment's row need not take it
 * again, as the outbox does before it records an event.
 */
const held = new WeakMap<EntityManager, Set<string>>();

/** Notes that a statement of the transaction of `m` changed `environment`'s row. */
export function heldEnvironment(m: EntityManager, environment: string): void {
  let environments = held.get(m);
  if (!environments) held.set(m, (environments = new Set()));
  environments.add(environment);
}

/** Whether the transaction of `m` has changed (so holds) `environment`'s row. */
function holdsEnvironment(m: EntityManager, environment: string): boolean {
  return held.get(m)?.has(environment) ?? false;
}

/**
 * Takes `environment`'s row for the rest of the transaction of `m` (PostgreSQL: waits for
 * any transaction that holds it); false when there is no such environment.
 */
export async function holdEnvironment(m: EntityManager, environment: string): Promise<boolean> {
  const found = await execute(
    m,
    'UPDATE environments SET fence = fence WHERE name = :environment',
    {
      environment,
    },
  );
  if (found) heldEnvironment(m, environment);
  return found > 0;
}

/**
 * PostgreSQL: takes `environment`'s row for the rest of the transaction of `m` without
 * changing it (SELECT … FOR UPDATE), unless the transaction holds it already.
 */
export async function lockEnvironment(m: EntityManager, environment: string): Promise<void> {
  if (holdsEnvironment(m, environment)) return;
  await select(m, 'SELECT name FROM environments WHERE name = :environment FOR UPDATE', {
    environment,
  });
  heldEnvironment(m, environment);
}
