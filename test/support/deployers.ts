/** Deployers and reviewers of deployments, speaking GraphQL over HTTP to one service. */
import { freshKey, ok, type World } from './world.js';

export const DEPLOYMENT_FIELDS =
  'id environment sequence status startedBy startedAt heartbeatExpiresAt finishedAt detail reconciledBy reconcileNote plan { id }';

export interface Deployment {
  id: string;
  environment: string;
  sequence: number;
  status: 'IN_PROGRESS' | 'SUCCEEDED' | 'FAILED' | 'UNKNOWN';
  startedBy: string;
  startedAt: string;
  heartbeatExpiresAt: string;
  finishedAt: string | null;
  detail: string | null;
  reconciledBy: string | null;
  reconcileNote: string | null;
  plan: { id: string };
}

export class Deployments {
  constructor(readonly world: World) {}

  /** Creates a no-approval environment and publishes `count` plans in it; returns their ids, oldest first. */
  async environmentWithPlans(name: string, agent: string, count: number): Promise<string[]> {
    await this.world.createEnvironment(name, 'MONOTONIC', false);
    return this.publish(name, agent, count);
  }

  async publish(environment: string, agent: string, count = 1): Promise<string[]> {
    const generation = await this.world.acquire(agent, environment);
    const ids: string[] = [];
    for (let i = 0; i < count; i++)
      ids.push((await this.world.submitOk(agent, environment, generation, `plan ${i}`)).id);
    await this.world.release(agent, environment, generation);
    return ids;
  }

  start(
    token: string,
    environment: string,
    planId: string,
    extra: { idempotencyKey?: string; heartbeatSeconds?: number } = {},
  ) {
    return this.world.gql<{ startDeployment: Deployment }>(
      token,
      `mutation($input: StartDeploymentInput!) { startDeployment(input: $input) { ${DEPLOYMENT_FIELDS} } }`,
      {
        input: {
          environment,
          planId,
          idempotencyKey: extra.idempotencyKey ?? freshKey(),
          ...extra,
        },
      },
    );
  }

  async startOk(token: string, environment: string, planId: string, heartbeatSeconds = 60) {
    return ok(await this.start(token, environment, planId, { heartbeatSeconds })).startDeployment;
  }

  heartbeat(token: string, deploymentId: string, heartbeatSeconds = 60) {
    return this.world.gql<{ heartbeatDeployment: Deployment }>(
      token,
      `mutation($input: HeartbeatDeploymentInput!) { heartbeatDeployment(input: $input) { ${DEPLOYMENT_FIELDS} } }`,
      { input: { deploymentId, heartbeatSeconds } },
    );
  }

  finish(
    token: string,
    deploymentId: string,
    outcome: 'SUCCEEDED' | 'FAILED',
    extra: {
      detail?: string;
      idempotencyKey?: string;
      state?: { lineage: string; serial: number };
    } = {},
  ) {
    return this.world.gql<{ finishDeployment: Deployment }>(
      token,
      `mutation($input: FinishDeploymentInput!) { finishDeployment(input: $input) { ${DEPLOYMENT_FIELDS} } }`,
      { input: { deploymentId, outcome, ...extra } },
    );
  }

  reconcile(token: string, deploymentId: string, outcome: 'SUCCEEDED' | 'FAILED', note: string) {
    return this.world.gql<{ reconcileDeployment: Deployment }>(
      token,
      `mutation($input: ReconcileDeploymentInput!) { reconcileDeployment(input: $input) { ${DEPLOYMENT_FIELDS} } }`,
      { input: { deploymentId, outcome, note } },
    );
  }

  async get(id: string): Promise<Deployment | null> {
    return ok(
      await this.world.gql<{ deployment: Deployment | null }>(
        this.world.admin,
        `query($id: ID!) { deployment(id: $id) { ${DEPLOYMENT_FIELDS} } }`,
        { id },
      ),
    ).deployment;
  }

  async list(environment: string, first = 500, after?: string): Promise<Deployment[]> {
    return ok(
      await this.world.gql<{ deployments: Deployment[] }>(
        this.world.admin,
        `query($environment: String!, $first: Int!, $after: ID) { deployments(environment: $environment, first: $first, after: $after) { ${DEPLOYMENT_FIELDS} } }`,
        { environment, first, after },
      ),
    ).deployments;
  }

  /** The environment's deployment fields. */
  async environment(name: string) {
    return ok(
      await this.world.gql<{
        environment: {
          currentPlan: { id: string } | null;
          activeDeployment: Deployment | null;
          deployedPlan: { id: string } | null;
        };
      }>(
        this.world.admin,
        `query($name: String!) { environment(name: $name) { currentPlan { id }
           activeDeployment { ${DEPLOYMENT_FIELDS} } deployedPlan { id } } }`,
        { name },
      ),
    ).environment;
  }
}
