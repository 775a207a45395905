import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from '../common/date.transformer.js';

/** One row per generation ever issued: to whom, for which holder. Never deleted. */
@Entity('lease_grants')
export class LeaseGrant {
  @PrimaryColumn({ type: 'varchar', length: 63 })
  environment: string;

  @PrimaryColumn({ type: 'integer' })
  generation: number;

  @Column({ type: 'varchar', length: 63 })
  principal: string;

  @Column({ type: 'varchar', length: 320 })
  holder: string;

  @Column({ name: 'acquired_at', type: 'bigint', transformer: bigintNumber })
  acquiredAt: number;
}
