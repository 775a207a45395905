import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { millis } from '../common/date.transformer.js';

export enum DeploymentStatus {
  IN_PROGRESS = 'IN_PROGRESS',
  SUCCEEDED = 'SUCCEEDED',
  FAILED = 'FAILED',
  UNKNOWN = 'UNKNOWN',
}

registerEnumType(DeploymentStatus, {
  name: 'DeploymentStatus',
  valuesMap: {
    UNKNOWN: {
      description: 'The heartbeat lapsed before a finish was reported: the outcome is not known.',
    },
  },
});

export enum DeploymentOutcome {
  SUCCEEDED = 'SUCCEEDED',
  FAILED = 'FAILED',
}

registerEnumType(DeploymentOutcome, { name: 'DeploymentOutcome' });

/**
 * One accepted start of a deployment (docs/design.md §10). Its row and status are written only by
 * the guard's deployment writes (src/fencing/deployment-writes.ts). A stored IN_PROGRESS whose
 * heartbeat has lapsed reads UNKNOWN (see `statusAt`).
 */
@ObjectType()
@Entity('deployments')
@Index('deployments_environment_sequence', ['environment', 'sequence'], { unique: true })
export class Deployment {
  @Field(() => ID, { description: '<environment>#<sequence>' })
  @PrimaryColumn({ type: 'varchar', length: 100 })
  id: string;

  @Field()
  @Column({ type: 'varchar', length: 63 })
  environment: string;

  @Field(() => Int, {
    description:
      'Per environment, strictly +1 per start: the fencing token for the system that applies the plan.',
  })
  @Column({ type: 'integer' })
  sequence: number;

  /** Resolved as `plan`. */
  @Column({ name: 'plan_id', type: 'varchar', length: 100 })
  planId: string;

  @Field(() => DeploymentStatus)
  @Column({ type: 'varchar', length: 16 })
  status: DeploymentStatus;

  @Field()
  @Column({ name: 'started_by', type: 'varchar', length: 63 })
  startedBy: string;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'started_at', type: 'bigint', transformer: millis })
  startedAt: Date;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'heartbeat_expires_at', type: 'bigint', transformer: millis })
  heartbeatExpiresAt: Date;

  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'finished_at', type: 'bigint', nullable: true, transformer: millis })
  finishedAt: Date | null;

  @Field(() => String, { nullable: true })
  @Column({ type: 'text', nullable: true })
  detail: string | null;

  @Field(() => String, { nullable: true })
  @Column({ name: 'reconciled_by', type: 'varchar', length: 63, nullable: true })
  reconciledBy: string | null;

  @Field(() => String, { nullable: true })
  @Column({ name: 'reconcile_note', type: 'text', nullable: true })
  reconcileNote: string | null;
}

/** IN_PROGRESS or UNKNOWN: blocks every other start in its environment (R20). */
export const ACTIVE_STATUSES = [DeploymentStatus.IN_PROGRESS, DeploymentStatus.UNKNOWN];

/** The deployment as it reads at `now`: a lapsed heartbeat reads UNKNOWN at once (R19). */
export function statusAt(deployment: Deployment, now: number): Deployment {
  if (
    deployment.status === DeploymentStatus.IN_PROGRESS &&
    deployment.heartbeatExpiresAt.getTime() <= now
  ) {
    return Object.assign(new Deployment(), deployment, { status: DeploymentStatus.UNKNOWN });
  }
  return deployment;
}
