import { Field, GraphQLISODateTime, ObjectType } from '@nestjs/graphql';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { millis } from '../common/date.transformer.js';
import { Role } from '../common/role.js';

/** Environment patterns stored as a JSON array; null stays null (all environments). */
const patternList = {
  to: (value: string[] | null | undefined): string | null =>
    value == null ? null : JSON.stringify(value),
  from: (value: string | null): string[] | null =>
    value == null ? null : (JSON.parse(value) as string[]),
};

@ObjectType()
@Entity('principals')
export class Principal {
  @Field()
  @PrimaryColumn({ type: 'varchar', length: 255 })
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

  /** R26: environment name patterns (`*` matches any run of characters) this token may act on; null: all. */
  @Field(() => [String], {
    nullable: true,
    description: 'Environment name patterns this principal may act on; null: all.',
  })
  @Column({ type: 'text', nullable: true, transformer: patternList })
  environments: string[] | null;

  /** R26: from this instant on (service clock) the token is UNAUTHENTICATED; null: never. */
  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'expires_at', type: 'bigint', nullable: true, transformer: millis })
  expiresAt: Date | null;

  /** The OIDC issuer whose exchanges made (and may renew) this principal; null for issued tokens. */
  @Column({ name: 'oidc_issuer', type: 'varchar', length: 255, nullable: true })
  oidcIssuer: string | null;

  /** R40: the provider of the person who signs in as this principal; null: no person. */
  @Column({ name: 'person_issuer', type: 'varchar', length: 255, nullable: true })
  personIssuer?: string | null;

  /** R40: the person's `sub` at personIssuer; (personIssuer, personSubject) names one principal. */
  @Column({ name: 'person_subject', type: 'varchar', length: 255, nullable: true })
  personSubject?: string | null;

  @Column({ name: 'person_email', type: 'varchar', length: 320, nullable: true })
  personEmail?: string | null;

  @Column({ name: 'person_name', type: 'varchar', length: 255, nullable: true })
  personName?: string | null;
}

@ObjectType()
export class IssuedToken {
  @Field(() => Principal)
  principal: Principal;

  @Field({ description: 'Shown once; only its hash is stored.' })
  token: string;
}
