import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from '../common/date.transformer.js';

/**
 * The first outcome of an operation sent with an idempotency key (R9), written in the
 * same transaction as the effect. Scoped per (principal, key).
 */
@Entity('idempotency_records')
@Index('idempotency_records_expires_at', ['expiresAt'])
export class IdempotencyRecord {
  @PrimaryColumn({ type: 'varchar', length: 63 })
  principal: string;

  @PrimaryColumn({ name: 'idempotency_key', type: 'varchar', length: 255 })
  key: string;

  @Column({ type: 'varchar', length: 32 })
  operation: string;

  @Column({ type: 'varchar', length: 64 })
  fingerprint: string;

  @Column({ name: 'plan_id', type: 'varchar', length: 100, nullable: true })
  planId: string | null;

  /** The deployment a startDeployment or finishDeployment call returned. */
  @Column({ name: 'deployment_id', type: 'varchar', length: 100, nullable: true })
  deploymentId: string | null;

  @Column({ name: 'error_code', type: 'varchar', length: 32, nullable: true })
  errorCode: string | null;

  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage: string | null;

  /** JSON of the error's extensions besides `code`. */
  @Column({ name: 'error_details', type: 'text', nullable: true })
  errorDetails: string | null;

  @Column({ name: 'created_at', type: 'bigint', transformer: bigintNumber })
  createdAt: number;

  @Column({ name: 'expires_at', type: 'bigint', transformer: bigintNumber })
  expiresAt: number;
}
