import { Field, GraphQLISODateTime, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { millis } from '../common/date.transformer.js';
import type { ApprovalSnapshot } from '../plans/approval.model.js';
import type { PolicyResult } from '../policies/plan-policy.model.js';

/** Policy results stored as a JSON array; a plan submitted before policies existed has none. */
const policyResultList = {
  to: (value: PolicyResult[] | null | undefined): string | null =>
    value == null ? null : JSON.stringify(value),
  from: (value: string | null): PolicyResult[] | null =>
    value == null ? null : (JSON.parse(value) as PolicyResult[]),
};

export enum PlanStatus {
  PROPOSED = 'PROPOSED',
  PUBLISHED = 'PUBLISHED',
  SUPERSEDED = 'SUPERSEDED',
  OBSOLETE = 'OBSOLETE',
  REJECTED = 'REJECTED',
  EXPIRED = 'EXPIRED',
}

export enum PlanContentType {
  TEXT = 'TEXT',
  TERRAFORM_PLAN_JSON = 'TERRAFORM_PLAN_JSON',
}

registerEnumType(PlanContentType, {
  name: 'PlanContentType',
  valuesMap: {
    TEXT: { description: 'Opaque text (the default).' },
    TERRAFORM_PLAN_JSON: {
      description: 'The output of `terraform show -json PLANFILE` (Terraform or OpenTofu).',
    },
  },
});

registerEnumType(PlanStatus, {
  name: 'PlanStatus',
  valuesMap: {
    EXPIRED: {
      description: "PROPOSED past the environment's proposalTtlSeconds: can no longer be approved.",
    },
  },
});

/** An immutable staged version. Only `status` and the review fields ever change, in the fencing module. */
@ObjectType()
@Entity('plans')
@Index('plans_environment_generation_sequence', ['environment', 'generation', 'sequence'], {
  unique: true,
})
@Index('plans_environment_status', ['environment', 'status'])
export class Plan {
  @Field(() => ID, {
    description: 'Generation-specific and immutable: <environment>@<generation>.<sequence>',
  })
  @PrimaryColumn({ type: 'varchar', length: 100 })
  id: string;

  @Field()
  @Column({ type: 'varchar', length: 63 })
  environment: string;

  @Field(() => Int)
  @Column({ type: 'integer' })
  generation: number;

  @Field(() => Int)
  @Column({ type: 'integer' })
  sequence: number;

  /**
   * The stored status. GraphQL reads it through PlansResolver.status, which shows a
   * PROPOSED plan past its expiresAt as EXPIRED before any write has materialised that.
   */
  @Column({ type: 'varchar', length: 16 })
  status: PlanStatus;

  @Field(() => String, { nullable: true })
  @Column({ type: 'varchar', length: 255, nullable: true })
  title: string | null;

  @Field()
  @Column({ type: 'text' })
  content: string;

  @Field({ description: 'sha256 of content, lowercase hex' })
  @Column({ name: 'content_hash', type: 'varchar', length: 64 })
  contentHash: string;

  @Field(() => PlanContentType)
  @Column({ name: 'content_type', type: 'varchar', length: 32 })
  contentType: PlanContentType;

  /**
   * JSON of the PlanSummary the service computed at submit (TERRAFORM_PLAN_JSON; null for
   * TEXT). GraphQL reads it through PlansResolver.summary.
   */
  @Column({ type: 'text', nullable: true })
  summary: string | null;

  @Field(() => String, {
    nullable: true,
    description:
      'Base64 of the binary plan file (terraform plan -out), when one was submitted. DEPLOYER and ADMIN only (DESIGN R54).',
  })
  @Column({ type: 'text', nullable: true })
  artifact: string | null;

  @Field(() => String, {
    nullable: true,
    description: "sha256 of the artifact's bytes, lowercase hex.",
  })
  @Column({ name: 'artifact_hash', type: 'varchar', length: 64, nullable: true })
  artifactHash: string | null;

  @Field(() => Int, {
    nullable: true,
    description: "The environment's deploymentSequence the plan was computed against (DESIGN R33).",
  })
  @Column({ name: 'based_on_deployment_sequence', type: 'integer', nullable: true })
  basedOnDeploymentSequence: number | null;

  /** R56: the lineage of the state the plan file was computed from (read through PlansResolver.priorState). */
  @Column({ name: 'prior_state_lineage', type: 'varchar', length: 64, nullable: true })
  priorStateLineage: string | null;

  /** R56: the serial of that state. */
  @Column({ name: 'prior_state_serial', type: 'integer', nullable: true })
  priorStateSerial: number | null;

  @Field(() => String, {
    nullable: true,
    description: 'e.g. the commit the plan was made from; shown to reviewers.',
  })
  @Column({ name: 'source_revision', type: 'varchar', length: 255, nullable: true })
  sourceRevision: string | null;

  @Field()
  @Column({ name: 'submitted_by', type: 'varchar', length: 63 })
  submittedBy: string;

  @Field(() => GraphQLISODateTime)
  @Column({ name: 'submitted_at', type: 'bigint', transformer: millis })
  submittedAt: Date;

  @Field(() => ID, { nullable: true })
  @Column({ name: 'based_on_plan_id', type: 'varchar', length: 100, nullable: true })
  basedOnPlanId: string | null;

  @Field(() => String, { nullable: true })
  @Column({ name: 'reviewed_by', type: 'varchar', length: 63, nullable: true })
  reviewedBy: string | null;

  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'reviewed_at', type: 'bigint', nullable: true, transformer: millis })
  reviewedAt: Date | null;

  @Field(() => String, { nullable: true })
  @Column({ name: 'rejection_reason', type: 'varchar', length: 255, nullable: true })
  rejectionReason: string | null;

  @Field(() => GraphQLISODateTime, { nullable: true })
  @Column({ name: 'published_at', type: 'bigint', nullable: true, transformer: millis })
  publishedAt: Date | null;

  @Field(() => GraphQLISODateTime, {
    nullable: true,
    description:
      'When a PROPOSED plan expires; null where the environment sets no proposalTtlSeconds.',
  })
  @Column({ name: 'expires_at', type: 'bigint', nullable: true, transformer: millis })
  expiresAt: Date | null;

  @Field(() => GraphQLISODateTime, {
    nullable: true,
    description:
      'When retention removed the content (content then reads as the empty string; contentHash stays).',
  })
  @Column({ name: 'purged_at', type: 'bigint', nullable: true, transformer: millis })
  purgedAt: Date | null;

  /** R34: the environment's policy version the plan's policies were evaluated at (null: before policies existed). */
  @Column({ name: 'policy_version', type: 'integer', nullable: true })
  policyVersion: number | null;

  /** R34: immutable; read through PlansResolver.policyResults (a plan loaded without it is read by id). */
  @Column({ name: 'policy_results', type: 'text', nullable: true, transformer: policyResultList })
  policyResults: PolicyResult[] | null;

  /**
   * Not stored: set on the plan an approval answers with, read in that approval's
   * transaction, so that its approvals and pending rules agree with its status.
   */
  snapshot?: ApprovalSnapshot;
}

/**
 * A plan's stored fields but its large immutable ones (content, summary, artifact: read by
 * id where needed).
 */
export const PLAN_FIELDS_BUT_CONTENT = [
  'id',
  'environment',
  'generation',
  'sequence',
  'status',
  'title',
  'contentHash',
  'contentType',
  'artifactHash',
  'basedOnDeploymentSequence',
  'priorStateLineage',
  'priorStateSerial',
  'sourceRevision',
  'submittedBy',
  'submittedAt',
  'basedOnPlanId',
  'reviewedBy',
  'reviewedAt',
  'rejectionReason',
  'publishedAt',
  'expiresAt',
  'purgedAt',
] as const satisfies readonly (keyof Plan)[];

/** The large immutable fields, with their columns: never in an event, read by id when selected. */
export const PLAN_LARGE_FIELDS = {
  content: 'content',
  summary: 'summary',
  artifact: 'artifact',
} as const satisfies Partial<Record<keyof Plan, string>>;
