import { PlanContentType } from '../model/plan.entity.js';
import { type ParsedTerraformPlan, parseTerraformPlan } from '../terraform/terraform-plan.js';

export { PlanContentType };

/** What a policy expression sees (DESIGN §16). CEL ints are bigints; the document keeps JSON's numbers (doubles). */
export interface PolicyActivation {
  plan: {
    environment: string;
    generation: bigint;
    title: string;
    contentType: string;
    contentBytes: bigint;
    submitter: string;
    submitterGroups: string[];
    via: string;
    sourceRevision: string;
  };
  summary: {
    add: bigint;
    change: bigint;
    destroy: bigint;
    replace: bigint;
    read: bigint;
    noop: bigint;
    resourceChanges: {
      address: string;
      type: string;
      actions: string[];
      before: unknown;
      after: unknown;
    }[];
    provisioners: { address: string; type: string; command: string }[];
    terraformVersion: string;
  };
  terraform: unknown;
}

/** The facts of one plan a policy may read, as submitted (or as tried by a dry run). */
export interface PlanFacts {
  environment: string;
  generation: number;
  title: string | null;
  content: string;
  contentType?: PlanContentType | null;
  submitter: string;
  submitterGroups: readonly string[];
  via?: string | null;
  sourceRevision?: string | null;
  /**
   * `parseTerraformPlan(content)` where the caller has it already (a submit parses the plan
   * for its summary): the activation is built from it instead of parsing the content again.
   * It must be the parse of this very `content`.
   */
  parsed?: ParsedTerraformPlan | null;
}

type Summary = Omit<
  PolicyActivation['summary'],
  'add' | 'change' | 'destroy' | 'replace' | 'read' | 'noop'
> &
  Record<'add' | 'change' | 'destroy' | 'replace' | 'read' | 'noop', number>;

/**
 * The one place a plan becomes a policy's activation. Title and sourceRevision read "" when
 * there is none; a TEXT plan has a zero summary and a null `terraform`.
 */
export function planActivation(facts: PlanFacts): PolicyActivation {
  const contentType = facts.contentType ?? PlanContentType.TEXT;
  const parsed =
    contentType === PlanContentType.TERRAFORM_PLAN_JSON
      ? parseTerraformDocument(facts.parsed ?? parseTerraformPlan(facts.content))
      : null;
  const summary = parsed?.summary ?? EMPTY_SUMMARY;
  return {
    plan: {
      environment: facts.environment,
      generation: BigInt(facts.generation),
      title: facts.title ?? '',
      contentType,
      contentBytes: BigInt(Buffer.byteLength(facts.content, 'utf8')),
      submitter: facts.submitter,
      submitterGroups: [...facts.submitterGroups],
      via: facts.via ?? 'graphql',
      sourceRevision: facts.sourceRevision ?? '',
    },
    summary: {
      add: BigInt(summary.add),
      change: BigInt(summary.change),
      destroy: BigInt(summary.destroy),
      replace: BigInt(summary.replace),
      read: BigInt(summary.read),
      noop: BigInt(summary.noop),
      resourceChanges: summary.resourceChanges,
      provisioners: summary.provisioners,
      terraformVersion: summary.terraformVersion,
    },
    terraform: parsed?.document ?? null,
  };
}

const EMPTY_SUMMARY: Summary = {
  add: 0,
  change: 0,
  destroy: 0,
  replace: 0,
  read: 0,
  noop: 0,
  resourceChanges: [],
  provisioners: [],
  terraformVersion: '',
};

/**
 * A Terraform plan's document and its summary as the service computes them (DESIGN §15):
 * `before`/`after` are the masked values (what Terraform marks sensitive reads
 * "(sensitive)"), exactly what parsing the summary's stored JSON gives, taken from the parse
 * rather than parsed again; the unmasked values are in `terraform`, the document itself.
 */
function parseTerraformDocument({ document, summary, maskedValues }: ParsedTerraformPlan): {
  document: unknown;
  summary: Summary;
} {
  return {
    document,
    summary: {
      ...summary,
      terraformVersion: summary.terraformVersion ?? '',
      // A computed command reads "" (no string to match).
      provisioners: summary.provisioners.map((p) => ({ ...p, command: p.command ?? '' })),
      resourceChanges: summary.resourceChanges.map((change, i) => ({
        ...change,
        before: maskedValues[i].before,
        after: maskedValues[i].after,
      })),
    },
  };
}
