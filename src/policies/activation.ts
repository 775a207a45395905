import { registerEnumType } from '@nestjs/graphql';
import { InputError } from '../common/errors.js';

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
      ? parseTerraformDocument(facts.content)
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
  terraformVersion: '',
};

/**
 * A `terraform show -json` document and its summary (DESIGN §15): the actions of each
 * `resource_changes[].change.actions`. Stand-in for the service's Terraform plan parser:
 * where that parser exists, planActivation takes its document and summary instead.
 */
function parseTerraformDocument(content: string): { document: unknown; summary: Summary } {
  let document: unknown;
  try {
    document = JSON.parse(content);
  } catch {
    throw new InputError('BAD_USER_INPUT', 'content is not a JSON document (TERRAFORM_PLAN_JSON)');
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new InputError(
      'BAD_USER_INPUT',
      'content is not a Terraform plan document (TERRAFORM_PLAN_JSON)',
    );
  }
  const summary: Summary = { ...EMPTY_SUMMARY, resourceChanges: [] };
  const doc = document as { terraform_version?: unknown; resource_changes?: unknown };
  if (typeof doc.terraform_version === 'string') summary.terraformVersion = doc.terraform_version;
  const changes = Array.isArray(doc.resource_changes) ? doc.resource_changes : [];
  for (const change of changes as {
    address?: unknown;
    type?: unknown;
    change?: { actions?: unknown; before?: unknown; after?: unknown };
  }[]) {
    const actions = Array.isArray(change?.change?.actions)
      ? (change.change.actions as unknown[]).map(String)
      : [];
    const key = actions.join(',');
    if (key === 'create') summary.add++;
    else if (key === 'update') summary.change++;
    else if (key === 'delete') summary.destroy++;
    else if (key === 'delete,create' || key === 'create,delete') summary.replace++;
    else if (key === 'read') summary.read++;
    else if (key === 'no-op') summary.noop++;
    if (key === 'no-op') continue;
    summary.resourceChanges.push({
      address: typeof change?.address === 'string' ? change.address : '',
      type: typeof change?.type === 'string' ? change.type : '',
      actions,
      before: change?.change?.before ?? null,
      after: change?.change?.after ?? null,
    });
  }
  return { document, summary };
}
