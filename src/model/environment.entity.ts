import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber, millis } from '../common/date.transformer.js';

export enum FencingMode {
  MONOTONIC = 'MONOTONIC',
  STRICT = 'STRICT',
}

registerEnumType(FencingMode, {
  name: 'FencingMode',
  valuesMap: {
    MONOTONIC: {
      description:
        'Reject a generation lower than the highest this environment has accepted (high-watermark).',
    },
    STRICT: {
      description:
        "Raise the fence when a lease is granted: only the current holder's generation is accepted.",
    },
  },
});

export enum QueueMode {
  FIFO = 'FIFO',
  LATEST = 'LATEST',
}

registerEnumType(QueueMode, {
  name: 'QueueMode',
  valuesMap: {
    FIFO: { description: 'Tickets are granted in the order they were enqueued.' },
    LATEST: { description: 'A new ticket supersedes every WAITING one: only the newest waits.' },
  },
});

/**
 * The ownership domain. Its fence, generation counter, lease and pointer columns
 * are written only by the fencing module.
 */
@ObjectType()
@Entity('environments')
export class Environment {
  @Field(() => ID)
  @PrimaryColumn({ type: 'varchar', length: 63 })
  name: string;

  @Field(() => FencingMode)
  @Column({ type: 'varchar', length: 16 })
  mode: FencingMode;

  @Field()
  @Column({ name: 'require_approval', type: 'boolean' })
  requireApproval: boolean;

  @Field(() => Int, {
    description:
      'Lowest generation that may still write (MONOTONIC: highest accepted; STRICT: current grant).',
  })
  @Column({ type: 'integer' })
  fence: number;

  @Field(() => Int)
  @Column({ name: 'last_issued_generation', type: 'integer' })
  lastIssuedGeneration: number;

  @Column({ name: 'lease_holder', type: 'varchar', length: 320, nullable: true })
  leaseHolder: string | null;

  @Column({ name: 'lease_principal', type: 'varchar', length: 63, nullable: true })
  leasePrincipal: string | null;

  @Column({ name: 'lease_generation', type: 'integer', nullable: true })
  leaseGeneration: number | null;

  @Column({ name: 'lease_acquired_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  leaseAcquiredAt: number | null;

  @Column({ name: 'lease_expires_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  leaseExpiresAt: number | null;

  @Column({ name: 'current_plan_id', type: 'varchar', length: 100, nullable: true })
  currentPlanId: string | null;

  @Column({ name: 'current_generation', type: 'integer' })
  currentGeneration: number;

  @Column({ name: 'current_sequence', type: 'integer' })
  currentSequence: number;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'created_at', type: 'bigint', transformer: millis })
  createdAt: Date;

  @Field(() => Int, {
    nullable: true,
    description: 'PROPOSED plans older than this read EXPIRED; null: they never expire.',
  })
  @Column({ name: 'proposal_ttl_seconds', type: 'integer', nullable: true })
  proposalTtlSeconds: number | null;

  @Field(() => Int, {
    description: 'Sequence of the last deployment started here (0: none yet).',
  })
  @Column({ name: 'deployment_sequence', type: 'integer' })
  deploymentSequence: number;

  /** R56: the lineage of the Terraform state an applier last reported (EnvironmentsResolver.terraformState). */
  @Column({ name: 'state_lineage', type: 'varchar', length: 64, nullable: true })
  stateLineage: string | null;

  /** R56: that state's serial. */
  @Column({ name: 'state_serial', type: 'integer', nullable: true })
  stateSerial: number | null;

  /** Set (with frozenBy and frozenAt) while publication is frozen (R17). */
  @Column({ name: 'frozen_reason', type: 'varchar', length: 255, nullable: true })
  frozenReason: string | null;

  @Column({ name: 'frozen_by', type: 'varchar', length: 63, nullable: true })
  frozenBy: string | null;

  @Column({ name: 'frozen_at', type: 'bigint', nullable: true, transformer: millis })
  frozenAt: Date | null;

  /** R34: bumped by every change of the plan policies; a submit is decided only under the version it was evaluated at. */
  @Field(() => Int, {
    description: 'Bumped by every change of planPolicies (DESIGN R34).',
  })
  @Column({ name: 'policy_version', type: 'integer', default: 0 })
  policyVersion: number;
  @Field(() => QueueMode, { description: 'How waiting lease tickets are granted (DESIGN §17).' })
  @Column({ name: 'queue_mode', type: 'varchar', length: 8 })
  queueMode: QueueMode;

  @Field(() => Int, { description: '1..100' })
  @Column({ name: 'max_queue_length', type: 'integer' })
  maxQueueLength: number;

  /** R51: the environment a plan must have succeeded in first (EnvironmentsResolver.promotion). */
  @Column({ name: 'promotion_from', type: 'varchar', length: 63, nullable: true })
  promotionFrom: string | null;

  /** R51: how long before publication that deployment must have finished. */
  @Column({ name: 'promotion_soak_minutes', type: 'integer', nullable: true })
  promotionSoakMinutes: number | null;

  @Field(() => Int, {
    nullable: true,
    description:
      'A published plan must start deploying within this many minutes (R52); null: no window.',
  })
  @Column({ name: 'deploy_within_minutes', type: 'integer', nullable: true })
  deployWithinMinutes: number | null;

  @Field(() => GraphQLISODateTime, {
    nullable: true,
    description: 'When drift was last reported (R53).',
  })
  @Column({ name: 'drift_reported_at', type: 'bigint', nullable: true, transformer: millis })
  driftReportedAt: Date | null;
}
