import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { millis } from '../common/date.transformer.js';
import type { Via } from '../common/via.js';

export enum AuditOutcome {
  ACCEPTED = 'ACCEPTED',
  REJECTED = 'REJECTED',
}

registerEnumType(AuditOutcome, { name: 'AuditOutcome' });

/** One row per accepted or rejected protected write, written in the decision's transaction. */
@ObjectType()
@Entity('audit_events')
@Index('audit_events_environment_id', ['environment', 'id'])
export class AuditEvent {
  @Field(() => ID)
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Field(() => GraphQLISODateTime)
  @Column({ type: 'bigint', transformer: millis })
  at: Date;

  @Field()
  @Column({ type: 'varchar', length: 63 })
  environment: string;

  @Field()
  @Column({ type: 'varchar', length: 320 })
  actor: string;

  @Field({
    description:
      'ACQUIRE_LEASE, RENEW_LEASE, RELEASE_LEASE, SUBMIT_PLAN, APPROVE_PLAN, REJECT_PLAN, ...',
  })
  @Column({ type: 'varchar', length: 32 })
  action: string;

  @Field(() => Int, { nullable: true })
  @Column({ type: 'integer', nullable: true })
  generation: number | null;

  @Field(() => ID, { nullable: true })
  @Column({ name: 'plan_id', type: 'varchar', length: 100, nullable: true })
  planId: string | null;

  @Field(() => AuditOutcome)
  @Column({ type: 'varchar', length: 16 })
  outcome: AuditOutcome;

  @Field(() => String, { nullable: true, description: 'extensions.code of the rejection' })
  @Column({ type: 'varchar', length: 32, nullable: true })
  code: string | null;

  @Field(() => String, { nullable: true })
  @Column({ type: 'text', nullable: true })
  detail: string | null;

  @Field(() => String, {
    nullable: true,
    description: 'The door the request came through: graphql or mcp.',
  })
  @Column({ type: 'varchar', length: 16, nullable: true })
  via: Via | null;
}
