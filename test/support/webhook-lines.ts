import { ok, type World } from './world.js';

/** A line's retries come quickly and never give up: what the line tests run under. */
export const QUICK_RETRIES = {
  PLANFENCE_WEBHOOK_POLL_MS: '50',
  PLANFENCE_WEBHOOK_BACKOFF_BASE_MS: '40',
  PLANFENCE_WEBHOOK_BACKOFF_MAX_MS: '200',
  PLANFENCE_WEBHOOK_MAX_ATTEMPTS: '1000',
};

export interface Delivery {
  id: string;
  environment: string;
  status: string;
  attempts: number;
}

/** A webhook's deliveries, newest first. */
export async function deliveries(world: World, webhookId: string): Promise<Delivery[]> {
  return ok(
    await world.gql<{ webhookDeliveries: Delivery[] }>(
      world.admin,
      `query($id: ID!) { webhookDeliveries(webhookId: $id, first: 500) { id environment status attempts } }`,
      { id: webhookId },
    ),
  ).webhookDeliveries;
}

/** `count` events in `environment`: freezes and unfreezes by turns. */
export async function toggle(world: World, environment: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    ok(
      await world.gql(
        world.admin,
        i % 2 === 0
          ? `mutation { freezeEnvironment(environment: "${environment}", reason: "r${i}") { name } }`
          : `mutation { unfreezeEnvironment(environment: "${environment}") { name } }`,
      ),
    );
  }
}
