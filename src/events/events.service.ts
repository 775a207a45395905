import { Injectable, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { EntityManager } from 'typeorm';
import type { AuditEvent } from '../audit/audit-event.entity.js';
import { Database } from '../database/database.js';
import type { Plan } from '../plans/plan.entity.js';
import type { Deployment } from '../deployments/deployment.entity.js';

interface PubSub {
  publish(event: { topic: string; payload: unknown }, callback?: () => void): void;
}

export const planPublishedTopic = (environment: string) => `planPublished:${environment}`;
export const auditRecordedTopic = (environment: string) => `auditEventRecorded:${environment}`;
/** Every environment's audit events on one topic (the dashboard's one subscription). */
export const activityTopic = () => 'activityRecorded';
export const deploymentChangedTopic = (environment: string) => `deploymentChanged:${environment}`;

/**
 * Subscription events, published after the commit of the transaction that caused them
 * (never for a transaction that rolled back), in commit order. They reach the
 * subscribers of this instance.
 */
@Injectable()
export class EventsService {
  private readonly logger = new Logger(EventsService.name);

  constructor(
    private readonly db: Database,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  // eslint-disable-next-line @typescript-eslint/require-await
  async planPublished(m: EntityManager, plan: Plan): Promise<void> {
    this.db.afterCommit(m, () =>
      this.publish(planPublishedTopic(plan.environment), { planPublished: plan }),
    );
  }

  // eslint-disable-next-line @typescript-eslint/require-await
  async auditEventRecorded(m: EntityManager, event: AuditEvent): Promise<void> {
    this.db.afterCommit(m, () => {
      this.publish(auditRecordedTopic(event.environment), { auditEventRecorded: event });
      this.publish(activityTopic(), { activityRecorded: event });
    });
  }

  // eslint-disable-next-line @typescript-eslint/require-await
  async deploymentChanged(m: EntityManager, deployment: Deployment): Promise<void> {
    this.db.afterCommit(m, () =>
      this.publish(deploymentChangedTopic(deployment.environment), {
        deploymentChanged: deployment,
      }),
    );
  }

  private publish(topic: string, payload: unknown): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance<{ graphql?: { pubsub?: PubSub } }>();
    const pubsub = fastify?.graphql?.pubsub;
    if (!pubsub) return void this.logger.warn(`no subscription transport; dropped ${topic}`);
    pubsub.publish({ topic, payload });
  }
}
