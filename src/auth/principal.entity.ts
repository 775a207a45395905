import { Field, GraphQLISODateTime, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { millis } from '../common/date.transformer.js';

export enum Role {
  ADMIN = 'ADMIN',
  AGENT = 'AGENT',
  REVIEWER = 'REVIEWER',
  VIEWER = 'VIEWER',
  DEPLOYER = 'DEPLOYER',
}

registerEnumType(Role, { name: 'Role' });

@ObjectType()
@Entity('principals')
export class Principal {
  @Field()
  @PrimaryColumn({ type: 'varchar', length: 63 })
  name: string;

  @Field(() => Role)
  @Column({ type: 'varchar', length: 16 })
  role: Role;

  /** sha256 of the bearer token; the token itself is never stored. */
  @Column({ name: 'token_hash', type: 'varchar', length: 64, unique: true })
  tokenHash: string;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'created_at', type: 'bigint', transformer: millis })
  createdAt: Date;

  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'revoked_at', type: 'bigint', nullable: true, transformer: millis })
  revokedAt: Date | null;
}

@ObjectType()
export class IssuedToken {
  @Field(() => Principal)
  principal: Principal;

  @Field({ description: 'Shown once; only its hash is stored.' })
  token: string;
}
