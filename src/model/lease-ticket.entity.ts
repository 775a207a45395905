import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber, millis } from '../common/date.transformer.js';

export enum LeaseTicketStatus {
  WAITING = 'WAITING',
  GRANTED = 'GRANTED',
  SUPERSEDED = 'SUPERSEDED',
  EXPIRED = 'EXPIRED',
  CANCELLED = 'CANCELLED',
}

registerEnumType(LeaseTicketStatus, {
  name: 'LeaseTicketStatus',
  valuesMap: {
    GRANTED: { description: 'The lease was granted to this ticket; see lease.' },
    SUPERSEDED: { description: 'A newer ticket replaced it (LATEST).' },
    EXPIRED: { description: 'Not granted within maxWaitSeconds.' },
  },
});

/**
 * One place in an environment's lease queue (DESIGN §17). Its status is written only by the
 * fencing module; the id orders the queue.
 */
@ObjectType()
@Entity('lease_tickets')
export class LeaseTicket {
  @Field(() => ID)
  @PrimaryColumn({ type: 'integer' })
  id: number;

  @Field()
  @Column({ type: 'varchar', length: 63 })
  environment: string;

  @Column({ type: 'varchar', length: 63 })
  principal: string;

  @Field()
  @Column({ type: 'varchar', length: 320 })
  holder: string;

  @Column({ name: 'ttl_seconds', type: 'integer' })
  ttlSeconds: number;

  /** As stored; as read (LeaseQueueService), a WAITING ticket past expiresAt is EXPIRED. */
  @Field(() => LeaseTicketStatus)
  @Column({ type: 'varchar', length: 16 })
  status: LeaseTicketStatus;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'enqueued_at', type: 'bigint', transformer: millis })
  enqueuedAt: Date;

  @Field(() => GraphQLISODateTime, { description: 'When a WAITING ticket turns EXPIRED.' })
  @Column({ name: 'expires_at', type: 'bigint', transformer: millis })
  expiresAt: Date;

  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'granted_at', type: 'bigint', nullable: true, transformer: millis })
  grantedAt: Date | null;

  @Column({ type: 'integer', nullable: true })
  generation: number | null;

  @Column({ name: 'ended_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  endedAt: number | null;

  /** Not stored: set when the ticket is read (null unless WAITING). */
  @Field(() => Int, {
    nullable: true,
    description: '1-based place in the queue while WAITING; null otherwise.',
  })
  position?: number | null;
}
